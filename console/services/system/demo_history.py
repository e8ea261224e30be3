"""Bulk history for scale tests and benchmarks: a million runs and a hundred thousand dead letters."""

import hashlib
import random
import uuid
from datetime import timedelta

from sqlalchemy import insert, select

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import fingerprint
from console.extensions import db
from console.models import DeadLetter, Run, RunEvent, Tenant, WorkOrder

BATCH = 20_000
HANDLERS = ["python:demo.noop", "python:demo.flaky", "python:demo.sleep", "plugin:payments", "plugin:search"]
ERRORS = [("http_502", "payments-gateway answered 502 for order {n}"),
          ("http_504", "search index timed out on shard {n}"),
          ("invalid_account", "account {n} is closed"),
          ("db_timeout", "lock wait timeout on ledger row {n}"),
          ("http_429", "rate limited by carrier api, retry after {n} s"),
          ("stock_mismatch", "reserved stock does not match order {n}")]


def seed_history(runs: int, dead_letters: int, clock: Clock = SYSTEM_CLOCK, seed: int = 7) -> str:
    """Insert `runs` finished runs over the past week, `dead_letters` of them dead, with their timelines."""
    rand = random.Random(seed)
    now = clock()
    tenant_ids = list(db.session.execute(select(Tenant.id).order_by(Tenant.id)).scalars())
    dead_every = max(1, runs // max(dead_letters, 1)) if dead_letters else 0
    # An error group with an active work order already (history added to a worked database) joins it: one active
    # work order per group is a unique index.
    active = select(WorkOrder.id, WorkOrder.tenant_id, WorkOrder.fingerprint).where(
        WorkOrder.status.in_(("open", "acknowledged")))
    orders: dict[tuple[int, str], int] = {(tenant_id, print_): order_id
                                          for order_id, tenant_id, print_ in db.session.execute(active)}
    made_dead = 0
    for start in range(0, runs, BATCH):
        run_rows, dead_plan = [], []
        for i in range(start, min(start + BATCH, runs)):
            created = now - timedelta(seconds=rand.uniform(60, 7 * 86_400))
            dead = dead_every and i % dead_every == 0 and made_dead < dead_letters
            attempts = 3 if dead else rand.choice((1, 1, 1, 1, 2))
            code, template = ERRORS[rand.randrange(len(ERRORS))]
            started = created + timedelta(milliseconds=rand.uniform(5, 400))
            finished = started + timedelta(seconds=rand.uniform(0.05, 30) * attempts)
            run_rows.append({
                "tenant_id": rand.choice(tenant_ids), "handler": rand.choice(HANDLERS),
                "params": {}, "policy_overrides": {}, "idempotency_key": f"hist-{uuid.uuid4().hex}",
                "status": "dead" if dead else "succeeded", "status_reason": "exhausted" if dead else None,
                "attempt": attempts, "series": 1, "executions": attempts, "progress": 100, "cancel_requested": False,
                "scheduled_for": created, "enqueued_at": created, "started_at": started, "finished_at": finished,
                "created_at": created, "updated_at": finished, "source": "history",
                "error_code": code if dead else None,
                "error_message": template.format(n=rand.randint(1000, 99_999)) if dead else None})
            if dead:
                made_dead += 1
                dead_plan.append(len(run_rows) - 1)
        # The ids in the rows' order: they are zipped with the rows below.
        ids = db.session.connection().execute(
            insert(Run.__table__).returning(Run.__table__.c.id, sort_by_parameter_order=True), run_rows).scalars().all()
        events = []
        for run_id, row in zip(ids, run_rows, strict=True):
            events.append({"run_id": run_id, "at": row["started_at"], "kind": "running", "to_status": "running",
                           "attempt": 1, "series": 1, "retry_token": uuid.uuid4().hex})
            events.append({"run_id": run_id, "at": row["finished_at"], "kind": row["status"],
                           "to_status": row["status"], "attempt": row["attempt"], "series": 1,
                           "retry_token": uuid.uuid4().hex})
        db.session.connection().execute(insert(RunEvent.__table__), events)
        letters = []
        for index in dead_plan:
            row, run_id = run_rows[index], ids[index]
            print_ = fingerprint(row["error_code"], row["error_message"])
            key = (row["tenant_id"], print_)
            if key not in orders:
                created = db.session.connection().execute(insert(WorkOrder.__table__).values(
                    tenant_id=row["tenant_id"], fingerprint=print_, status="open", dead_letter_count=0,
                    title=f"{row['handler']}: {row['error_code']}", created_at=row["finished_at"]))
                orders[key] = created.inserted_primary_key[0]
            letters.append({"run_id": run_id, "tenant_id": row["tenant_id"], "handler": row["handler"], "series": 1,
                            "attempts": 3, "reason": "exhausted", "error_code": row["error_code"],
                            "error_message": row["error_message"], "fingerprint": print_, "status": "open",
                            "work_order_id": orders[key], "created_at": row["finished_at"]})
        if letters:
            db.session.connection().execute(insert(DeadLetter.__table__), letters)
        db.session.commit()
    count_letters(orders.values())
    db.session.commit()
    digest = hashlib.sha1(f"{runs}:{dead_letters}:{seed}".encode()).hexdigest()[:8]
    return f"History: {runs} runs ({made_dead} dead letters, {len(orders)} work orders) over the past week [{digest}]."


def count_letters(order_ids) -> None:
    """Set each work order's dead letter count to the letters inserted under it (the Work orders list shows it)."""
    orders, letters = WorkOrder.__table__, DeadLetter.__table__
    db.session.execute(orders.update().where(orders.c.id.in_(list(order_ids))).values(
        dead_letter_count=select(db.func.count()).select_from(letters).where(
            letters.c.work_order_id == orders.c.id).scalar_subquery()))
