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
from console.services.system.demo_history import ERRORS, HANDLERS, count_letters
from console.services.workorders import changes as workorders

BATCH = 20_000
SCHEDULED_SHARE = 0.85  # of runs belong to a task; the rest were submitted by other services
LATE_SHARE = 0.012  # of task runs start past their 60 s limit
DEAD_SHARE = 0.02
RETRIED_SHARE = 0.05
REPLAYED_SHARE = 0.6  # of dead letters, replayed later (and then succeeded)
ALERTED_SHARE = 0.3  # of dead letters, the first of their group: an alert is delivered
REPLAY_RUNS_FOR = timedelta(seconds=2)  # from a replay to its run's success


def _tasks(count: int, tenant_ids: list[int], rand: random.Random, now, days: int) -> list:
    """Create paused tasks (history only: they do not fire) spread over the tenants, as old as their history."""
    since = (now - timedelta(days=days)).replace(second=0, microsecond=0)  # as the first run's minute is (_plan)
    rows = [{"tenant_id": tenant_ids[i % len(tenant_ids)], "name": f"report-history-{i:03d}",
             "handler": HANDLERS[i % len(HANDLERS)], "params": {}, "policy_overrides": {},
             "cron": f"*/{rand.choice((1, 5, 10, 15, 30))} * * * *", "timezone": "UTC", "concurrency_policy": "allow",
             "jitter_s": 0, "debounce_s": 0, "sla": {"max_start_delay_s": 60, "deadline_s": 1800}, "paused": True,
             "misfire_grace_s": 300, "missed_total": 0, "created_at": since, "updated_at": now}
            for i in range(count)]
    db.session.execute(insert(Task.__table__), rows)
    db.session.commit()
    return db.session.execute(select(Task.id, Task.tenant_id, Task.handler).where(
        Task.name.like("report-history-%")).order_by(Task.id)).all()


def seed_report_history(runs: int, days: int = 90, tasks: int = 200, clock: Clock = SYSTEM_CLOCK,
                        seed: int = 11, chronological: bool = False) -> str:
    """Insert `runs` finished runs over the past `days` days, most of them firings of `tasks` tasks.

    `chronological` gives the runs ids in the order they were created, as a real history has them (the lists sort
    by id); the scale benchmarks keep the random order their figures were measured with.
    """
    rand = random.Random(seed)
    now = clock()
    tenant_ids = list(db.session.execute(select(Tenant.id).order_by(Tenant.id)).scalars())
    task_rows = _tasks(tasks, tenant_ids, rand, now, days) if tasks else []
    orders: dict[tuple[int, str], int] = {}
    totals = {"dead": 0, "replayed": 0, "late": 0, "alerts": 0}
    plans = (_plan(rand, now, days, tenant_ids, task_rows) for _ in range(runs))
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
                letters.append(_letter(run_id, row, extra, orders))
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
            if alerts:
                db.session.connection().execute(insert(OutboxMessage.__table__), alerts)
        db.session.commit()
    count_letters(orders.values())
    db.session.commit()
    _close_recovered(orders.values())
    digest = hashlib.sha1(f"{runs}:{days}:{tasks}:{seed}".encode()).hexdigest()[:8]
    return (f"Report history: {runs} runs over {days} days, {len(task_rows)} tasks, {totals['late']} late starts, "
            f"{totals['dead']} dead letters ({totals['replayed']} replayed), {totals['alerts']} alerts [{digest}].")


def _close_recovered(order_ids) -> None:
    """Close the work orders whose every letter was replayed and recovered, at the moment the last one recovered (a
    history's order read "closed 37 s ago" when it was closed at seeding)."""
    letters = DeadLetter.__table__
    recovered = db.session.execute(
        select(letters.c.work_order_id, func.max(letters.c.resolved_at)).where(letters.c.work_order_id.in_(
            list(order_ids))).group_by(letters.c.work_order_id)
        .having(func.count() == func.count(letters.c.resolved_at))).all()
    for order_id, last_replay in recovered:
        workorders.close_if_resolved(order_id, last_replay + REPLAY_RUNS_FOR)
    db.session.commit()


def _plan(rand: random.Random, now, days: int, tenant_ids: list[int], task_rows: list) -> tuple[dict, dict]:
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


def _letter(run_id: int, row: dict, extra: dict, orders: dict) -> dict:
    print_ = fingerprint(extra["code"], extra["message"])
    key = (row["tenant_id"], print_)
    if key not in orders:
        orders[key] = db.session.connection().execute(insert(WorkOrder.__table__).values(
            tenant_id=row["tenant_id"], fingerprint=print_, status="open", dead_letter_count=0,
            title=f"{row['handler']}: {extra['code']}", created_at=extra["dead_at"])).inserted_primary_key[0]
    return {"run_id": run_id, "tenant_id": row["tenant_id"], "task_id": row["task_id"], "handler": row["handler"],
            "series": 1, "attempts": extra["attempts"], "reason": "exhausted", "error_code": extra["code"],
            "error_message": extra["message"], "fingerprint": print_, "work_order_id": orders[key],
            "status": "replayed" if extra["replay_at"] else "open", "created_at": extra["dead_at"],
            "resolved_at": extra["replay_at"], "resolved_by": "ops" if extra["replay_at"] else None}


def _alert(letter_id: int, letter: dict, rand: random.Random) -> dict:
    created = letter["created_at"]
    return {"kind": "alert", "channel": "default", "dedup_key": f"dead:{letter['tenant_id']}:{letter['fingerprint']}",
            "tenant_id": letter["tenant_id"], "occurrences": 1, "status": "delivered", "attempts": 1,
            "payload": {"rule": "retry_limit_reached", "dead_letter_id": letter_id, "task_id": letter["task_id"],
                        "handler": letter["handler"], "tenant_id": letter["tenant_id"]},
            "next_attempt_at": created, "created_at": created,
            "delivered_at": created + timedelta(seconds=rand.choice((2, 3, 5, 8, 12, 30, 45, 90, 240, 420)))}
