"""Seed 001's SLA watch: record late starts and missed deadlines; three in a row escalate."""

import logging
from datetime import timedelta

from sqlalchemy import and_, func, or_, select, update

from console import metrics
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.figures import DEFAULT_MAX_START_DELAY_S
from console.extensions import db
from console.models import Run, SlaBreach, Task
from console.services.delivery import outbox
from console.services.policies import versions as policies

log = logging.getLogger("rebound.sla")
ESCALATE_AFTER = 3
LOOKBACK = timedelta(days=2)
RECHECK = timedelta(minutes=10)
STILL_GOING = ("pending", "running", "retry_wait")
SLA_KEYS = ("max_start_delay_s", "deadline_s")


def _limits(task: Task) -> tuple[int | None, int | None]:
    """Return (max_start_delay_s, deadline_s): the task's own, else its policy's."""
    return limits_of(task.sla, task.policy_id, task.policy_overrides)


def records_late_starts(task: Task) -> bool:
    """Tell whether the SLA check records the task's late starts (it has a start limit, its own or its policy's);
    without one, only the Reports' on-time figure counts them, against its default."""
    return _limits(task)[0] is not None


def start_limit(task: Task) -> int:
    """Return how late a run of the task may start: its SLA's, else its policy's, else the Reports' default."""
    return _limits(task)[0] or DEFAULT_MAX_START_DELAY_S


def limits_of(sla: dict | None, policy_id: int | None, overrides: dict | None) -> tuple[int | None, int | None]:
    """Return (max_start_delay_s, deadline_s) of a task's columns: its own SLA, else its policy's."""
    sla = sla or {}
    _, policy = policies.effective(policy_id, overrides)
    return (sla.get("max_start_delay_s", policy.max_start_delay_s), sla.get("deadline_s", policy.deadline_s))


def in_force(task: Task) -> dict[str, tuple[int, str]]:
    """Return each SLA limit the check holds the task to, by key, with where it comes from ("task" or "policy")."""
    own = task.sla or {}
    from_policy = dict(zip(SLA_KEYS, limits_of(None, task.policy_id, task.policy_overrides), strict=True))
    return {key: (own[key], "task") if key in own else (from_policy[key], "policy")
            for key in SLA_KEYS if own.get(key, from_policy[key]) is not None}


def check(clock: Clock = SYSTEM_CLOCK) -> list[SlaBreach]:
    """Record every new breach since the last check, alert on each, escalate three in a row."""
    now = clock()
    found: list[SlaBreach] = []
    known = set(db.session.execute(select(SlaBreach.run_id, SlaBreach.kind).where(
        SlaBreach.detected_at >= now - LOOKBACK - timedelta(days=1))).all())
    for task in db.session.execute(select(Task).where(Task.deleted_at.is_(None))).scalars():
        max_delay, deadline = _limits(task)
        if max_delay is None and deadline is None:
            continue
        # Only runs still open, or settled since the last few checks, or ended without succeeding and due by their
        # deadline since then (one that died early missed its deadline when that came, not when it is replayed):
        # the rest were judged already.
        recent = now - RECHECK
        unsettled = [Run.started_at.is_(None), Run.started_at >= recent, Run.finished_at.is_(None),
                     Run.finished_at >= recent]
        if deadline is not None:
            unsettled.append(and_(Run.status != "succeeded", func.coalesce(Run.due_at, Run.scheduled_for)
                                  >= recent - timedelta(seconds=deadline)))
        runs = db.session.execute(select(Run).where(
            Run.task_id == task.id, Run.scheduled_for >= now - LOOKBACK, Run.status != "cancelled", or_(*unsettled))
            .order_by(Run.scheduled_for)).scalars().all()
        for run in runs:
            for kind, limit, reached_at in (("start_delay", max_delay, run.started_at),
                                            ("deadline", deadline, run.finished_at if run.status == "succeeded"
                                             else None)):
                if limit is None:
                    continue
                # A run deferred into its window is due when the window opens: waiting for it is no breach.
                due = (run.due_at or run.scheduled_for) + timedelta(seconds=limit)
                if run.series > 1 and (kind == "start_delay" or due <= (run.enqueued_at or now)):
                    # A replay's series: the schedule's promise was the first series', missed (and judged) when it
                    # died; a person replaying it later makes no new breach, today, of an old firing. When it was
                    # replayed is enqueued_at (started_at stays the first series' start: a run that died early then
                    # breached again when its day-old replay succeeded, and paged).
                    continue
                if (run.id, kind) in known:
                    if reached_at is not None or run.status in STILL_GOING:  # a dead run's lateness stays as found
                        _late_by_so_far(run.id, kind, (reached_at or now) - due)
                    continue
                late_at = reached_at or now
                if late_at > due:
                    breach = SlaBreach(task_id=task.id, run_id=run.id, tenant_id=run.tenant_id, kind=kind,
                                       late_by_s=int((late_at - due).total_seconds()), detected_at=now)
                    db.session.add(breach)
                    known.add((run.id, kind))
                    found.append(breach)
                    metrics.SLA_BREACHES.inc(tenant=run.tenant_id, kind=kind)
                    outbox.add("alert", f"sla:{task.id}:{kind}", {
                        "rule": "sla_breach", "task_id": task.id, "task": task.name, "run_id": run.id,
                        "tenant_id": run.tenant_id, "kind": kind, "late_by_s": breach.late_by_s,
                        "scheduled_for": run.scheduled_for.isoformat()}, now, tenant_id=run.tenant_id,
                        channel="sla-breach")
        db.session.flush()
        _escalate(task, now)
    db.session.commit()
    if found:
        log.warning("recorded %d SLA breaches", len(found))
    return found


def _late_by_so_far(run_id: int, kind: str, late: timedelta) -> None:
    """Raise a recorded breach's lateness to what it is now: found while the run had not started (or finished), it
    said how late it was at that check (2 s), not when it started at last (68 s)."""
    db.session.execute(update(SlaBreach).where(SlaBreach.run_id == run_id, SlaBreach.kind == kind,
                                               SlaBreach.late_by_s < int(late.total_seconds()))
                       .values(late_by_s=int(late.total_seconds())).execution_options(synchronize_session=False))


def _escalate(task: Task, now) -> None:
    """Escalate to the manager channel when the task's last three runs each breached."""
    last_runs = db.session.execute(select(Run.id).where(Run.task_id == task.id, Run.scheduled_for <= now,
                                                        Run.status != "cancelled")
                                   .order_by(Run.scheduled_for.desc()).limit(ESCALATE_AFTER)).scalars().all()
    if len(last_runs) < ESCALATE_AFTER:
        return
    breaches = db.session.execute(select(SlaBreach).where(SlaBreach.run_id.in_(last_runs))).scalars().all()
    if {b.run_id for b in breaches} != set(last_runs) or any(b.escalated for b in breaches):
        return
    for breach in breaches:
        breach.escalated = True
    metrics.RETRY_ESCALATED.inc(tenant=task.tenant_id, reason="sla_consecutive_breaches")
    outbox.add("escalation", f"sla-escalation:{task.id}:{max(last_runs)}", {
        "rule": "sla_consecutive_breaches", "task_id": task.id, "task": task.name, "runs": sorted(last_runs),
        # The notice names its tenant from here, as a breach's does: a receiver routing by tenant read null.
        "tenant_id": task.tenant_id, "count": ESCALATE_AFTER, "at": now.isoformat()}, now, tenant_id=task.tenant_id,
        channel="manager")
