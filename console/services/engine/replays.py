"""Replay dead letters: many in one transaction and one Redis round trip, keeping each run's idempotency key."""

import json
import logging
from dataclasses import dataclass

from sqlalchemy import exists, select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, Run, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import queueing, transitions
from console.services.policies import versions as policies
from console.services.workorders import orders as workorders

log = logging.getLogger("rebound.runs")
RUNS, LETTERS = Run.__table__, DeadLetter.__table__
# What a new attempt series starts from, besides its series number, times and a cleared error.
RESTART_VALUES = {"attempt": 0, "retry_token": None, "next_retry_at": None, "finished_at": None,
                  "cancel_requested": False, "progress": 0, "progress_message": None}


@dataclass(frozen=True)
class Replayed:
    """Which runs a replay restarted, and which dead letters it left alone."""

    runs: dict[int, int]  # dead letter id → run id, for the letters whose run was restarted
    skipped: list[int]  # no longer open, run not dead, another tenant's, or a second letter of a run already replayed


def replay_many(letter_ids: list[int], actor: Actor, *, tenant_id: int | None = None,
                clock: Clock = SYSTEM_CLOCK) -> Replayed:
    """Restart the dead run of each open dead letter as a new series, audit each, commit once, queue them all."""
    rows = restart(letter_ids, actor, tenant_id=tenant_id, now=clock())
    if rows:
        db.session.commit()
        enqueue(rows)
    replayed = {row.letter_id: row.id for row in rows}
    return Replayed(replayed, [letter_id for letter_id in letter_ids if letter_id not in replayed])


def restart(letter_ids: list[int], actor: Actor, *, tenant_id: int | None = None, now) -> list:
    """Restart the dead runs of these open letters in the caller's transaction; `enqueue` the rows after its commit."""
    chosen = _replayable(letter_ids, tenant_id)
    restarted = _restart(chosen, actor, now) if chosen else {}
    rows = [row for row in chosen if row.id in restarted]
    if rows:
        _close_letters(rows, actor, now)
        _record(rows, actor, now)
    return rows


def replayable(letter_ids: list[int], tenant_id: int | None = None) -> list:
    """Return the dead runs these open letters would restart, reading only (one row per run: run columns, letter_id)."""
    return _replayable(letter_ids, tenant_id)


def _replayable(letter_ids: list[int], tenant_id: int | None) -> list:
    """Return one row per run (its first open letter in the list) whose run is dead; run columns plus letter_id."""
    query = (select(RUNS, LETTERS.c.id.label("letter_id"), Tenant.name.label("tenant_name"))
             .join(LETTERS, LETTERS.c.run_id == RUNS.c.id).join(Tenant, Tenant.id == RUNS.c.tenant_id)
             .where(LETTERS.c.id.in_(letter_ids), LETTERS.c.status == "open", RUNS.c.status == "dead")
             .order_by(LETTERS.c.id))
    if tenant_id is not None:
        query = query.where(LETTERS.c.tenant_id == tenant_id)
    first_per_run = {}
    for row in db.session.execute(query):
        first_per_run.setdefault(row.id, row)
    return list(first_per_run.values())


def _restart(rows: list, actor: Actor, now) -> dict[int, object]:
    """Move the runs dead → pending as a new series in one guarded UPDATE; return the restarted runs by id."""
    # The guard is the letter read above still being open: a concurrent replay or discard closes it first.
    still_open = exists().where(LETTERS.c.run_id == RUNS.c.id, LETTERS.c.status == "open",
                                LETTERS.c.id.in_([row.letter_id for row in rows]))
    restarted = transitions.move_many("dead", "pending", [row.id for row in rows], now, reason="replay",
                                      actor=actor.name, guard=still_open, clear_error=True, **RESTART_VALUES,
                                      series=RUNS.c.series + 1, enqueued_at=now)
    return {run.id: run for run in restarted}


def _close_letters(rows: list, actor: Actor, now) -> None:
    """Mark every open letter of the restarted runs replayed, and close the work orders left with none open."""
    connection = db.session.connection()
    # By id, not by run_id and status: SQLite would otherwise walk every open letter on the status index.
    run_ids = [row.id for row in rows]
    letter_ids = connection.execute(select(LETTERS.c.id).where(LETTERS.c.run_id.in_(run_ids))).scalars().all()
    closed = connection.execute(
        update(LETTERS).where(LETTERS.c.id.in_(letter_ids), LETTERS.c.status == "open")
        .values(status="replayed", resolved_at=now, resolved_by=actor.name).returning(LETTERS.c.work_order_id))
    for work_order_id in sorted({order_id for order_id in closed.scalars() if order_id}):
        workorders.close_if_resolved(work_order_id, now, by=actor)


def _record(rows: list, actor: Actor, now) -> None:
    """Link each restarted run's timeline to its dead letter, and audit each replay."""
    db.session.connection().execute(transitions.INSERT_EVENT, [transitions.event_row(
        run_id=row.id, at=now, kind="replay_of_dead_letter", attempt=0, series=row.series + 1,
        worker_id=row.worker_id, actor=actor.name, data={"dead_letter_id": row.letter_id}) for row in rows])
    audit.record_many(db.session, actor, "dead_letter.replay", "dead_letter", [
        audit.Change(row.letter_id, before={"status": "open"},
                     after={"status": "replayed", "run_id": row.id, "series": row.series + 1}, tenant=row.tenant_name)
        for row in rows], clock=lambda: now)


def enqueue(rows: list) -> None:
    """Queue the first attempt of every new series; if Redis is down the reconciler queues them later."""
    timeouts: dict[str, int] = {}

    def timeout_s(row) -> int:
        key = json.dumps([row.policy_id, row.policy_overrides], sort_keys=True, default=str)
        if key not in timeouts:
            timeouts[key] = policies.effective(row.policy_id, row.policy_overrides)[1].timeout_s
        return timeouts[key]

    try:
        queueing.enqueue_many_now([(row.id, row.series + 1, 0, timeout_s(row)) for row in rows])
    except Exception as error:  # noqa: BLE001 - any transport failure is recoverable by the reconciler
        log.warning("%d replayed runs committed but not queued (%s); the reconciler will queue them", len(rows), error)
