"""What the rollups count, read from the system of record for a span of whole hours.

Every fact is counted in the hour it became final, from a row that never changes after: a timeline event
(append-only), a dead letter's creation, an alert's delivery, a breach's detection. So an hour's counts stop
changing once its events are committed, and recomputing any span from scratch gives what the incremental
job wrote.
"""

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import exists, or_, select
from sqlalchemy.orm import aliased

from console.domain.errors import shown_message
from console.domain.figures import DEFAULT_MAX_START_DELAY_S
from console.domain.histograms import ALERT_LATENCY, RECOVERY, TRIGGER_DELAY
from console.domain.statuses import INTERRUPTED
from console.extensions import db
from console.models import DeadLetter, ForecastWarning, OutboxMessage, Run, RunEvent, SlaBreach, Task
from console.services.delivery.channel_report import timed_alerts
from console.services.runs.query import conflict_move
from console.services.scheduling.sla import limits_of

CHUNK = 500  # ids per IN (...) list
CONFLICT_KINDS = {("submitted", "window"): "window", ("submitted", "quota"): "quota",
                  ("cancelled", "mutex_forbid"): "mutex", ("cancelled", "replaced"): "mutex",
                  ("replaced", "replaced"): "mutex", ("deferred", "quota_class"): "quota_class"}


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


@dataclass
class Cells:
    """Counts per (hour, tenant, task, handler), and dead letters per (hour, tenant, task, fingerprint)."""

    runs: dict = field(default_factory=lambda: defaultdict(Counter))
    errors: dict = field(default_factory=dict)

    def at(self, moment: datetime, tenant_id, task_id, handler) -> Counter:
        return self.runs[(floor_hour(moment), tenant_id or 0, task_id or 0, handler or "")]


def collect(start: datetime, end: datetime) -> Cells:
    """Count everything that became final in [start, end)."""
    cells = Cells()
    _first_starts(cells, start, end)
    _outcomes(cells, start, end)
    _dead_letters(cells, start, end)
    _alerts(cells, start, end)
    _breaches(cells, start, end)
    _conflicts(cells, start, end)
    return cells


def _chunks(ids) -> list[list[int]]:
    ids = sorted(set(ids))
    return [ids[i:i + CHUNK] for i in range(0, len(ids), CHUNK)]


def start_limits() -> dict[int, int]:
    """Return each task's max start delay: its SLA, else its policy's, else the default."""
    found, policies_seen = {}, {}
    for row in db.session.execute(select(Task.id, Task.sla, Task.policy_id, Task.policy_overrides)):
        sla = row.sla or {}
        if sla.get("max_start_delay_s") is not None:
            found[row.id] = sla["max_start_delay_s"]
            continue
        key = (row.policy_id, json.dumps(row.policy_overrides or {}, sort_keys=True))
        if key not in policies_seen:
            policies_seen[key] = limits_of(None, row.policy_id, row.policy_overrides)[0]
        found[row.id] = policies_seen[key] or DEFAULT_MAX_START_DELAY_S
    return found


def _first_starts(cells: Cells, start: datetime, end: datetime) -> None:
    """On-time and trigger delay, counted when a task run's first attempt starts."""
    rows = db.session.execute(
        select(RunEvent.at, Run.tenant_id, Run.task_id, Run.handler, Run.scheduled_for, Run.due_at)
        .join(Run, Run.id == RunEvent.run_id)
        .where(RunEvent.kind == "running", RunEvent.at >= start, RunEvent.at < end, RunEvent.attempt == 1,
               RunEvent.series == 1, Run.task_id.is_not(None))).all()
    limits = start_limits() if rows else {}
    for row in rows:
        due = row.due_at or row.scheduled_for
        if due is None:
            continue
        delay = max(0.0, (row.at - due).total_seconds())
        cell = cells.at(row.at, row.tenant_id, row.task_id, row.handler)
        cell["starts"] += 1
        cell["on_time"] += delay <= limits.get(row.task_id, DEFAULT_MAX_START_DELAY_S)
        cell[TRIGGER_DELAY.column(delay)] += 1


def _outcomes(cells: Cells, start: datetime, end: datetime) -> None:
    """Series that ended, retries that worked, duplicates, failed attempts, recoveries."""
    rows = db.session.execute(
        select(RunEvent.id, RunEvent.run_id, RunEvent.at, RunEvent.kind, RunEvent.from_status, RunEvent.attempt,
               RunEvent.series, RunEvent.reason, Run.tenant_id, Run.task_id, Run.handler)
        .join(Run, Run.id == RunEvent.run_id)
        .where(RunEvent.kind.in_(("succeeded", "failed", "dead", "retry_wait", "stale_success")),
               RunEvent.at >= start, RunEvent.at < end)).all()
    # Only a success after an earlier attempt or series can be a duplicate, a retry or a recovery: the first
    # attempt of the first series is the run's first claim. So only those runs' timelines are read.
    histories = _histories([row.run_id for row in rows if row.kind == "stale_success" or (
        row.kind == "succeeded" and (row.attempt >= 2 or row.series >= 2))])
    for row in rows:
        cell = cells.at(row.at, row.tenant_id, row.task_id, row.handler)
        from_running = row.from_status == "running"
        history = histories.get(row.run_id, ())
        if row.kind in ("succeeded", "stale_success") and any(
                kind in ("succeeded", "stale_success") and event_id < row.id for event_id, kind, _, _ in history):
            cell["duplicates"] += 1  # the handler already succeeded once for this key
        if row.kind == "succeeded":
            cell["finished"] += 1
            cell["succeeded"] += 1
            if row.series == 1 and row.attempt >= 2:
                cell["retried"] += 1
                cell["retry_succeeded"] += not any(reason == "manual_retry" for _, _, _, reason in history)
            if row.series >= 2:
                _recoveries(cell, row, history)
        elif row.kind in ("failed", "dead") and from_running:
            cell["finished"] += 1
            cell["retried"] += row.series == 1
        if from_running and row.kind in ("retry_wait", "failed", "dead") and row.reason != INTERRUPTED:
            cell["attempts_failed"] += 1  # an attempt its worker was stopped during did not fail
        if row.kind == "dead":
            cell["dead"] += 1


def _histories(run_ids) -> dict[int, list[tuple]]:
    """Return each run's timeline as (id, kind, at, reason), plus its dead letters as ("letter", created_at)."""
    found: dict[int, list[tuple]] = defaultdict(list)
    for chunk in _chunks(run_ids):
        # By run id alone (no kind): the planner would otherwise walk the kind index over every run's events.
        for event in db.session.execute(select(RunEvent.run_id, RunEvent.id, RunEvent.kind, RunEvent.at,
                                               RunEvent.reason).where(RunEvent.run_id.in_(chunk))):
            found[event.run_id].append((event.id, event.kind, event.at, event.reason))
        for letter in db.session.execute(select(DeadLetter.run_id, DeadLetter.created_at).where(
                DeadLetter.run_id.in_(chunk))):
            found[letter.run_id].append((None, "letter", letter.created_at, None))
    return found


def _recoveries(cell: Counter, row, history: list[tuple]) -> None:
    """A dead letter is recovered by its run's first success after it; time to recover runs until then."""
    successes = [(event_id, at) for event_id, kind, at, _ in history if kind == "succeeded"]
    for _, kind, created, _ in history:
        if kind != "letter" or created >= row.at or any(
                created < at and event_id < row.id for event_id, at in successes):
            continue  # not dead yet when this success came, or an earlier success recovered it
        cell["recovered"] += 1
        cell[RECOVERY.column((row.at - created).total_seconds())] += 1


def _dead_letters(cells: Cells, start: datetime, end: datetime) -> None:
    for row in db.session.execute(select(
            DeadLetter.created_at, DeadLetter.tenant_id, DeadLetter.task_id, DeadLetter.handler,
            DeadLetter.fingerprint, DeadLetter.error_code, DeadLetter.error_message)
            .where(DeadLetter.created_at >= start, DeadLetter.created_at < end)):
        cells.at(row.created_at, row.tenant_id, row.task_id, row.handler)["dead_letters"] += 1
        key = (floor_hour(row.created_at), row.tenant_id, row.task_id or 0, row.fingerprint)
        code, message, count = cells.errors.get(key, (row.error_code or "", "", 0))
        # The greatest normalised message stands for the group, in any hour, so a rebuild picks the same one.
        message = max(message, shown_message(row.error_message or "")[:255])
        cells.errors[key] = (code, message, count + 1)


def _alerts(cells: Cells, start: datetime, end: datetime) -> None:
    """Dead letter -> its group's alert first taken by a channel, in the hour it was; repeats held back to gather a
    count are left out."""
    for row in db.session.execute(select(
            OutboxMessage.created_at, OutboxMessage.first_sent_at, OutboxMessage.tenant_id, OutboxMessage.payload)
            .where(*timed_alerts(start, end))):
        payload = row.payload
        cell = cells.at(row.first_sent_at, row.tenant_id, payload.get("task_id"), payload.get("handler"))
        cell["alerts"] += 1
        cell[ALERT_LATENCY.column(max(0.0, (row.first_sent_at - row.created_at).total_seconds()))] += 1


def _breaches(cells: Cells, start: datetime, end: datetime) -> None:
    for row in db.session.execute(
            select(SlaBreach.detected_at, SlaBreach.tenant_id, SlaBreach.task_id, Run.handler)
            .join(Run, Run.id == SlaBreach.run_id)
            .where(SlaBreach.detected_at >= start, SlaBreach.detected_at < end)):
        cells.at(row.detected_at, row.tenant_id, row.task_id, row.handler)["breaches"] += 1


def _conflicts(cells: Cells, start: datetime, end: datetime) -> None:
    """Firings the planner deferred or skipped for a conflict, and whether a forecast named them beforehand."""
    # A run held back by its class is one conflict: the claim notes it again when the run's wait went elsewhere (its
    # own task's slots) and came back, so only a run's first note counts, wherever the period starts.
    earlier = aliased(RunEvent)
    first_class_wait = ~exists().where(earlier.run_id == RunEvent.run_id, earlier.kind == "deferred",
                                       earlier.reason == "quota_class", earlier.id < RunEvent.id)
    rows = db.session.execute(
        select(RunEvent.at, RunEvent.kind, RunEvent.reason, Run.tenant_id, Run.task_id, Run.handler,
               Run.scheduled_for)
        .join(Run, Run.id == RunEvent.run_id)
        .where(RunEvent.kind.in_(("submitted", "cancelled", "replaced", "deferred")),
               RunEvent.at >= start, RunEvent.at < end, conflict_move(RunEvent),
               or_(RunEvent.kind != "deferred", first_class_wait))).all()
    rows = [row for row in rows if row.scheduled_for is not None and row.task_id is not None]
    if not rows:
        return
    minutes = [row.scheduled_for.replace(second=0, microsecond=0) for row in rows]
    named = {(w.kind, w.tenant_id, w.task_id, w.at): w.made_at for w in db.session.execute(
        select(ForecastWarning).where(ForecastWarning.at >= min(minutes), ForecastWarning.at <= max(minutes)))
        .scalars()}
    for row, minute in zip(rows, minutes, strict=True):
        kind = CONFLICT_KINDS[(row.kind, row.reason or row.kind)]
        made_at = named.get((kind, row.tenant_id, 0 if kind == "quota" else row.task_id, minute))
        cell = cells.at(row.at, row.tenant_id, row.task_id, row.handler)
        cell["conflicts"] += 1
        cell["conflicts_named"] += made_at is not None and made_at <= row.at

