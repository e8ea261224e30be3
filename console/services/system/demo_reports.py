"""History for the Reports page: scheduled tasks' runs over many days, with late starts, retries, dead letters
that get replayed, delivered alerts and SLA breaches (for demos, and the 90-day benchmark over a million runs).
"""

import hashlib
import itertools
import random
import uuid
from datetime import timedelta

from sqlalchemy import func, insert, select

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import fingerprint
from console.extensions import db
from console.models import DeadLetter, OutboxMessage, Run, RunEvent, SlaBreach, Task, Tenant, WorkOrder
from console.services.actor import SYSTEM
from console.services.delivery import outbox
from console.services.system.demo_history import ERRORS, HANDLERS
from console.services.workorders.changes import SETTLED_NOTE

BATCH = 20_000
SCHEDULED_SHARE = 0.85  # of runs belong to a task; the rest were submitted by other services
LATE_SHARE = 0.012  # of task runs start past their 60 s limit
DEAD_SHARE = 0.02
RETRIED_SHARE = 0.05
REPLAYED_SHARE = 0.6  # of dead letters, replayed later (and then succeeded)
DISCARDED_SHARE = 0.5  # of the dead letters not replayed, discarded by a person later (the rest stay open)
DISCARD_REASONS = ("superseded by a newer run of the same data", "duplicate of a request already fulfilled",
                   "the customer cancelled the order", "test data from a partner's sandbox")
ALERTED_SHARE = 0.3  # of dead letters, the first of their group: an alert is delivered
REPLAY_RUNS_FOR = timedelta(seconds=2)  # from a replay to its run's success


PREFIX = "report-history-"


def _tasks(count: int, tenant_ids: list[int], rand: random.Random, now, days: int) -> list:
    """Create paused tasks (history only: they do not fire) spread over the tenants, as old as their history."""
    since = (now - timedelta(days=days)).replace(second=0, microsecond=0)  # as the first run's minute is (_plan)
    # Numbered after the history's tasks already there (a first start's six, an earlier --days): a name taken was
    # a UNIQUE traceback (helper 129). Counting the deleted ones too keeps clear of every name in use.
    first = db.session.execute(select(func.count()).select_from(Task).where(
        Task.name.startswith(PREFIX))).scalar_one()
    names = [f"{PREFIX}{i:03d}" for i in range(first, first + count)]
    rows = [{"tenant_id": tenant_ids[i % len(tenant_ids)], "name": names[i],
             "handler": HANDLERS[i % len(HANDLERS)], "params": {}, "policy_overrides": {},
             "cron": f"*/{rand.choice((1, 5, 10, 15, 30))} * * * *", "timezone": "UTC", "concurrency_policy": "allow",
             "jitter_s": 0, "debounce_s": 0, "sla": {"max_start_delay_s": 60, "deadline_s": 1800}, "paused": True,
             "misfire_grace_s": 300, "missed_total": 0, "created_at": since, "updated_at": now}
            for i in range(count)]
    db.session.execute(insert(Task.__table__), rows)
    db.session.commit()
    return db.session.execute(select(Task.id, Task.tenant_id, Task.handler).where(
        Task.name.in_(names)).order_by(Task.id)).all()


def seed_report_history(runs: int, days: int = 90, tasks: int = 200, clock: Clock = SYSTEM_CLOCK,
                        seed: int = 11, chronological: bool = False) -> str:
    """Insert `runs` finished runs over the past `days` days, most of them firings of `tasks` tasks.

    `chronological` gives the runs ids in the order they were created, as a real history has them (the lists sort
    by id); the scale benchmarks keep the random order their figures were measured with.
    """
    rand = random.Random(seed)
    settling = random.Random(-seed)  # discards drawn apart, so the runs a seed gave before discards are unchanged
    now = clock()
    tenant_ids = list(db.session.execute(select(Tenant.id).order_by(Tenant.id)).scalars())
    task_rows = _tasks(tasks, tenant_ids, rand, now, days) if tasks else []
    parked: list[tuple] = []  # each letter's id, error group and what settled it, for its work order
    totals = {"dead": 0, "replayed": 0, "late": 0, "alerts": 0}
    plans = (_plan(rand, settling, now, days, tenant_ids, task_rows) for _ in range(runs))
    if chronological:
        plans = iter(sorted(plans, key=lambda planned: planned[0]["created_at"]))
    while plan := list(itertools.islice(plans, BATCH)):
        # The ids in the rows' order: they are zipped with the rows below.
        ids = db.session.connection().execute(
            insert(Run.__table__).returning(Run.__table__.c.id, sort_by_parameter_order=True),
            [row for row, _ in plan]).scalars().all()
        events, letters, breaches = [], [], []
        for run_id, (row, extra) in zip(ids, plan, strict=True):
            events += _events(run_id, row, extra)
            if extra["late"] and row["task_id"]:
                totals["late"] += 1
                breaches.append({"task_id": row["task_id"], "run_id": run_id, "tenant_id": row["tenant_id"],
                                 "kind": "start_delay", "late_by_s": int(extra["delay"] - 60),
                                 "detected_at": row["started_at"] + timedelta(seconds=30), "escalated": False})
            if extra["dead_at"]:
                totals["dead"] += 1
                letters.append(_letter(run_id, row, extra))
        db.session.connection().execute(insert(RunEvent.__table__), events)
        if breaches:
            db.session.connection().execute(insert(SlaBreach.__table__), breaches)
        if letters:
            letter_ids = db.session.connection().execute(insert(DeadLetter.__table__).returning(
                DeadLetter.__table__.c.id, sort_by_parameter_order=True), letters).scalars().all()
            alerts = [_alert(letter_id, letter, rand) for letter_id, letter in zip(letter_ids, letters, strict=True)
                      if rand.random() < ALERTED_SHARE]
            totals["alerts"] += len(alerts)
            totals["replayed"] += sum(1 for letter in letters if letter["status"] == "replayed")
            parked += [(letter_id, letter) for letter_id, letter in zip(letter_ids, letters, strict=True)]
            if alerts:
                db.session.connection().execute(insert(OutboxMessage.__table__), alerts)
        db.session.commit()
    _file_work_orders(parked)
    digest = hashlib.sha1(f"{runs}:{days}:{tasks}:{seed}".encode()).hexdigest()[:8]
    return (f"Report history: {runs} runs over {days} days, {len(task_rows)} tasks, {totals['late']} late starts, "
            f"{totals['dead']} dead letters ({totals['replayed']} replayed), {totals['alerts']} alerts [{digest}].")


def _settled_at(letter: dict):
    """When a letter stopped needing work: its replayed run's success, or its discard (None while it is open)."""
    if letter["status"] == "replayed":
        return letter["resolved_at"] + REPLAY_RUNS_FOR
    return letter["resolved_at"]


def _episodes(parked: list[tuple[int, dict]]) -> list[tuple[dict, list[int], object]]:
    """Split each error group's letters into work orders as the engine does: a letter joins its group's open order,
    and once every letter of that order is settled the order closes, so the group's next letter opens a new one.

    Return the orders oldest first, each as its first letter, its letters' ids and when it closed (None: open).
    """
    groups: dict[tuple[int, str], list[list]] = {}
    for letter_id, letter in sorted(parked, key=lambda item: item[1]["created_at"]):
        orders, settled = groups.setdefault((letter["tenant_id"], letter["fingerprint"]), []), _settled_at(letter)
        if orders and (orders[-1][2] is None or orders[-1][2] > letter["created_at"]):
            until = orders[-1][2]
            orders[-1][1].append(letter_id)
            orders[-1][2] = None if until is None or settled is None else max(until, settled)
        else:
            orders.append([letter, [letter_id], settled])
    return sorted((tuple(order) for orders in groups.values() for order in orders),
                  key=lambda order: order[0]["created_at"])


def _file_work_orders(parked: list[tuple[int, dict]]) -> None:
    """Write the history's work orders, ids in the order they opened (as a real history has them), each settled one
    closed by the system at the moment its last letter was settled.

    Written as they ended, like the rest of the history (no audit entry, no resolve to send): closing them now would
    audit a fortnight of closes after the demo's first entries, dated in the past.
    """
    letters, orders = DeadLetter.__table__, WorkOrder.__table__
    for first, ids, until in _episodes(parked):
        # A group with an order open already (a history added to one before, or the demo's): its letters join it, as
        # a live dead letter would (a second open order of one group broke the unique index: a traceback, helper 139).
        same_group = (orders.c.tenant_id == first["tenant_id"], orders.c.fingerprint == first["fingerprint"])
        joined = None if until is not None else db.session.connection().execute(
            orders.update().where(*same_group, orders.c.status.in_(("open", "acknowledged")))
            .values(dead_letter_count=orders.c.dead_letter_count + len(ids)).returning(orders.c.id)).scalar()
        order_id = joined or db.session.connection().execute(insert(WorkOrder.__table__).values(
            tenant_id=first["tenant_id"], fingerprint=first["fingerprint"], dead_letter_count=len(ids),
            title=f"{first['handler']}: {first['error_code']}", created_at=first["created_at"],
            **({"status": "open"} if until is None else {"status": "closed", "closed_at": until,
                                                           "closed_by": SYSTEM.name, "close_note": SETTLED_NOTE}))
        ).inserted_primary_key[0]
        db.session.connection().execute(letters.update().where(letters.c.id.in_(ids)).values(work_order_id=order_id))
    db.session.commit()


def _plan(rand: random.Random, settling: random.Random, now, days: int, tenant_ids: list[int],
          task_rows: list) -> tuple[dict, dict]:
    """Return one run's row and what happened to it."""
    scheduled = (now - timedelta(seconds=rand.uniform(120, days * 86_400))).replace(second=0, microsecond=0)
    task = rand.choice(task_rows) if task_rows and rand.random() < SCHEDULED_SHARE else None
    roll = rand.random()
    late = task is not None and roll < LATE_SHARE
    delay = rand.uniform(61, 900) if late else (rand.uniform(3, 45) if roll < 0.03 else rand.uniform(0.05, 2.0))
    started = scheduled + timedelta(seconds=delay)
    dead, retried = rand.random() < DEAD_SHARE, rand.random() < RETRIED_SHARE
    attempts = 3 if dead else (2 if retried else 1)
    finished = started + timedelta(seconds=rand.uniform(0.05, 20) * attempts)
    replayed = dead and rand.random() < REPLAYED_SHARE
    recovered = replayed
    replay_at = finished + timedelta(seconds=rand.uniform(300, 6 * 3600)) if replayed else None
    if replay_at and replay_at >= now:
        replay_at = recovered = replayed = None
    discard_at = (finished + timedelta(seconds=settling.uniform(2 * 3600, 3 * 86_400))
                  if dead and not replayed and settling.random() < DISCARDED_SHARE else None)
    if discard_at and discard_at >= now:
        discard_at = None
    code, template = ERRORS[rand.randrange(len(ERRORS))]
    tenant_id = task.tenant_id if task else rand.choice(tenant_ids)
    status = "succeeded" if not dead or recovered else "dead"
    row = {"tenant_id": tenant_id, "task_id": task.id if task else None,
           "handler": task.handler if task else rand.choice(HANDLERS), "params": {}, "policy_overrides": {},
           "idempotency_key": f"report-{uuid.uuid4().hex}", "status": status,
           "status_reason": "exhausted" if status == "dead" else None, "attempt": 1 if replayed else attempts,
           "series": 2 if replayed else 1, "executions": attempts + (1 if replayed else 0),
           "progress": 100, "cancel_requested": False, "scheduled_for": scheduled, "enqueued_at": scheduled,
           "started_at": started, "finished_at": replay_at + REPLAY_RUNS_FOR if replayed else finished,
           "created_at": scheduled, "updated_at": finished, "source": "cron" if task else "history",
           "error_code": code if status == "dead" else None,
           "error_message": template.format(n=rand.randint(1000, 99_999)) if dead else None}
    return row, {"late": late, "delay": delay, "attempts": attempts, "finished": finished,
                 "dead_at": finished if dead else None, "replay_at": replay_at, "recovered": recovered,
                 "discard_at": discard_at, "discard_reason": settling.choice(DISCARD_REASONS),
                 "code": code, "message": template.format(n=rand.randint(1000, 99_999))}


def _events(run_id: int, row: dict, extra: dict) -> list[dict]:
    def event(at, kind, attempt, series=1, from_status=None, reason=None):
        return {"run_id": run_id, "at": at, "kind": kind, "to_status": kind, "from_status": from_status,
                "attempt": attempt, "series": series, "reason": reason}

    found = [event(row["started_at"], "running", 1)]
    if extra["attempts"] > 1:
        found.append(event(row["started_at"] + timedelta(seconds=1), "retry_wait", 1, from_status="running"))
    final = "dead" if extra["dead_at"] else "succeeded"
    found.append(event(extra["finished"], final, extra["attempts"], from_status="running"))
    if extra["replay_at"]:
        found.append(event(extra["replay_at"], "pending", 0, 2, "dead", "replay"))
        found.append(event(extra["replay_at"] + timedelta(seconds=1), "running", 1, 2, "pending"))
        found.append(event(extra["replay_at"] + REPLAY_RUNS_FOR, "succeeded" if extra["recovered"] else "dead",
                           1, 2, "running"))
    return found


def _letter(run_id: int, row: dict, extra: dict) -> dict:
    """A run's dead letter, replayed, discarded or open; its work order is set once every letter is in."""
    status = "replayed" if extra["replay_at"] else "discarded" if extra["discard_at"] else "open"
    return {"run_id": run_id, "tenant_id": row["tenant_id"], "task_id": row["task_id"], "handler": row["handler"],
            "series": 1, "attempts": extra["attempts"], "reason": "exhausted", "error_code": extra["code"],
            "error_message": extra["message"], "fingerprint": fingerprint(extra["code"], extra["message"]),
            "work_order_id": None, "status": status, "created_at": extra["dead_at"],
            "resolved_at": extra["replay_at"] or extra["discard_at"],
            "resolved_by": None if status == "open" else "ops",
            "resolution_note": extra["discard_reason"] if status == "discarded" else None}


def _alert(letter_id: int, letter: dict, rand: random.Random) -> dict:
    created = letter["created_at"]
    return {"kind": "alert", "channel": "default", "dedup_key": outbox.dead_letters_key(
                letter["tenant_id"], letter["fingerprint"], letter["work_order_id"]),
            "tenant_id": letter["tenant_id"], "occurrences": 1, "status": "delivered", "attempts": 1,
            "payload": {"rule": "retry_limit_reached", "dead_letter_id": letter_id, "task_id": letter["task_id"],
                        "handler": letter["handler"], "tenant_id": letter["tenant_id"]},
            "next_attempt_at": created, "created_at": created,
            "delivered_at": (told := created + timedelta(seconds=rand.choice((2, 3, 5, 8, 12, 30, 45, 90, 240, 420)))),
            "first_sent_at": told}
