"""Replay dead letters: many in one transaction and one Redis round trip, keeping each run's idempotency key."""

import json
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Text, bindparam, cast, exists, func, insert, literal_column, null, select, update

from console.db.id_lists import among
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, Run, RunEvent, Tenant
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import queueing, transitions, waiting_fixes
from console.services.policies import versions as policies

log = logging.getLogger("rebound.runs")
RUNS, LETTERS, EVENTS = Run.__table__, DeadLetter.__table__, RunEvent.__table__
# What a new attempt series starts from, besides its series number, times and a cleared error. The result goes too:
# kept, a cancelled series' partial result read as the new series' own while it ran (helper 135).
RESTART_VALUES = {"attempt": 0, "retry_token": None, "next_retry_at": None, "finished_at": None,
                  "cancel_requested": False, "progress": 0, "progress_message": None, "result": None}
OPENED = {"status": "open"}


@dataclass(frozen=True)
class Replayed:
    """Which runs a replay restarted, and which dead letters it left alone."""

    runs: dict[int, int]  # dead letter id → run id, for the letters whose run was restarted
    skipped: list[int]  # no longer open, run not dead, another tenant's, or a second letter of a run already replayed
    closed_fixes: list[int]  # the params fixes that waited for approval on the letters replayed, closed as superseded


class Restart(NamedTuple):
    """What restart() did: the runs it restarted, and the params fixes waiting on their letters it closed."""

    rows: list["Restarted"]
    closed_fixes: list[int]


class Restarted(NamedTuple):
    """A run a replay restarted, as it was just before: `enqueue` queues series + 1."""

    id: int
    letter_id: int
    series: int
    attempt: int
    error_code: str | None
    policy_id: int | None
    policy_overrides: dict
    tenant_id: int
    status: str = "dead"


def replay_many(letter_ids: list[int], actor: Actor, *, tenant_id: int | None = None,
                clock: Clock = SYSTEM_CLOCK, queue=None) -> Replayed:
    """Restart the dead run of each open dead letter as a new series, audit each, commit once, queue them all.

    `queue` takes the committed rows instead of `enqueue` (a QueuedBehind, for chunks that come back to back).
    """
    rows, closed = restart(letter_ids, actor, tenant_id=tenant_id, now=clock())
    if rows:
        db.session.commit()
        (queue or enqueue)(rows)
    replayed = {row.letter_id: row.id for row in rows}
    return Replayed(replayed, [letter_id for letter_id in letter_ids if letter_id not in replayed], closed)


def restart(letter_ids: list[int], actor: Actor, *, tenant_id: int | None = None, now) -> Restart:
    """Restart the dead runs of these open letters in the caller's transaction, closing the params fixes waiting on
    them; `enqueue` the rows after its commit.

    Set-based, whatever the number of letters: a handful of statements per call, none per letter. The order of
    locks is the waiting fixes', the run's, then its letter's, as approving a fix, resolving a run and fixing its
    params take them, so none of them deadlocks against another.
    """
    nothing = Restart([], [])
    if not letter_ids:
        return nothing
    fixes = waiting_fixes.hold(letter_ids)
    candidates = _hold(letter_ids, tenant_id)
    if not candidates:
        return nothing
    claimed = set(_claim([row.letter_id for row in candidates], actor, now))
    rows = []
    for row in candidates:  # by run: its first open letter is the one the new series answers
        if row.letter_id in claimed and (not rows or rows[-1].id != row.id):
            rows.append(row)
    if not rows:
        return nothing
    moved = transitions.move_many("dead", "pending", [row.id for row in rows], now, reason="replay",
                                  actor=actor.signature, clear_error=True, columns=(), **RESTART_VALUES,
                                  series=RUNS.c.series + 1, enqueued_at=now)
    if len(moved) != len(rows):
        # Each run was read dead with its letter open, and its letter claimed since: nothing else moves a dead run
        # without closing that letter first, so this is a bug; rolled back by the caller, never half-written.
        raise transitions.StaleRun(f"{len(rows) - len(moved)} of {len(rows)} runs left dead after their letters "
                                   "were claimed")
    _close_other_letters(rows, claimed, actor, now)
    _record(rows, actor, now)
    return Restart(rows, waiting_fixes.close(fixes, actor, now))


def replayable(letter_ids: list[int], tenant_id: int | None = None) -> list:
    """Return the dead runs these open letters would restart, reading only (one row per run: run columns, letter_id)."""
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


def _hold(letter_ids: list[int], tenant_id: int | None) -> list[Restarted]:
    """Read the dead runs of the open letters, by run then letter; on PostgreSQL lock the runs, in id order."""
    # The overrides as text, parsed once per distinct value: nearly every run has the same (none).
    overrides = cast(RUNS.c.policy_overrides, Text)
    connection = db.session.connection()
    query = (select(RUNS.c.id, LETTERS.c.id, RUNS.c.series, RUNS.c.attempt, RUNS.c.error_code, RUNS.c.policy_id,
                    overrides, RUNS.c.tenant_id)
             .join(LETTERS, LETTERS.c.run_id == RUNS.c.id)
             .where(among(LETTERS.c.id, letter_ids, connection.dialect.name), LETTERS.c.status == "open",
                    RUNS.c.status == "dead")
             .order_by(RUNS.c.id, LETTERS.c.id).with_for_update(of=RUNS))
    if tenant_id is not None:
        query = query.where(LETTERS.c.tenant_id == tenant_id)
    parsed: dict[str | None, dict] = {}
    rows = []
    for run_id, letter_id, series, attempt, error_code, policy_id, text, tenant in connection.execute(query):
        if text not in parsed:
            parsed[text] = json.loads(text) if text else {}
        rows.append(Restarted(run_id, letter_id, series, attempt, error_code, policy_id, parsed[text], tenant))
    return rows


def _claim(letter_ids: list[int], actor: Actor, now: datetime) -> list[int]:
    """Mark the letters replayed if still open and their run still dead: the guard a racing replay or discard
    meets (under READ COMMITTED the loser waits for the winner's commit, then finds the letter no longer open)."""
    # The run's status again: on SQLite the read above ran before the transaction (and its write lock) began.
    run_dead = exists().where(RUNS.c.id == LETTERS.c.run_id, RUNS.c.status == "dead")
    connection = db.session.connection()
    return connection.execute(
        update(LETTERS).where(among(LETTERS.c.id, letter_ids, connection.dialect.name), LETTERS.c.status == "open",
                              run_dead)
        .values(status="replayed", resolved_at=now, resolved_by=actor.signature)
        .returning(LETTERS.c.id)).scalars().all()


def _close_other_letters(rows: list[Restarted], claimed: set[int], actor: Actor, now: datetime) -> None:
    """Mark replayed any other open letter of the restarted runs.

    Their work orders stay open: the "outbox" job closes one once the replayed runs succeeded (a replayed run
    may die again).
    """
    connection = db.session.connection()
    # By id, not by run_id and status: SQLite would otherwise walk every open letter on the status index.
    others = [letter_id for letter_id in connection.execute(
        select(LETTERS.c.id).where(among(LETTERS.c.run_id, [row.id for row in rows], connection.dialect.name)))
        .scalars() if letter_id not in claimed]
    if others:
        connection.execute(update(LETTERS).where(LETTERS.c.id.in_(others), LETTERS.c.status == "open")
                           .values(status="replayed", resolved_at=now, resolved_by=actor.signature))


def _json_object(dialect_name: str, key: str, value):
    build = func.json_build_object if dialect_name == "postgresql" else func.json_object
    # The key as SQL text, not a parameter: PostgreSQL cannot type a parameter of a function taking "any".
    return build(literal_column(f"'{key}'"), value)


def _record(rows: list[Restarted], actor: Actor, now: datetime) -> None:
    """Link each restarted run's timeline to its dead letter, and audit each replay."""
    connection = db.session.connection()
    # The links are built by the database from the rows just written, as move_many's timeline rows are.
    link = insert(EVENTS).from_select(transitions.EVENT_COLUMNS, select(
        RUNS.c.id, bindparam("at", now, type_=EVENTS.c.at.type), bindparam("kind", "replay_of_dead_letter"),
        RUNS.c.attempt, RUNS.c.series, RUNS.c.executions, RUNS.c.retry_token, RUNS.c.worker_id, *[null()] * 7,
        bindparam("actor", actor.signature), _json_object(connection.dialect.name, "dead_letter_id", LETTERS.c.id),
    ).join_from(LETTERS, RUNS, RUNS.c.id == LETTERS.c.run_id)
        .where(among(LETTERS.c.id, [row.letter_id for row in rows], connection.dialect.name)).order_by(RUNS.c.id))
    connection.execute(link)
    names = dict(connection.execute(select(Tenant.id, Tenant.name)).all())
    audit.record_many(db.session, actor, "dead_letter.replay", "dead_letter", [
        audit.Change(row.letter_id, before=OPENED, after={"status": "replayed", "run_id": row.id,
                                                          "series": row.series + 1}, tenant=names.get(row.tenant_id))
        for row in rows], clock=lambda: now)


def enqueue(rows: list) -> None:
    """Queue the first attempt of every new series; if Redis is down the reconciler queues them later."""
    _send(get_redis(), first_attempts(rows))


class QueuedBehind:
    """Queue each committed chunk's runs on a thread of its own while the caller writes the next chunk.

    An unpaced bulk replay writes chunks back to back. Queueing one (packing thousands of jobs for Redis) is Python
    work the next chunk's statements need not wait for: SQLite and psycopg release the GIL while the database
    works, so the two overlap. One chunk at a time, in commit order; leaving the block waits for the last one.
    """

    def __init__(self):
        self._client = get_redis()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="replay-queue")
        self._last: Future | None = None

    def __call__(self, rows: list) -> None:
        attempts = first_attempts(rows)  # policies are read here, on the caller's session
        self.wait()
        self._last = self._pool.submit(_send, self._client, attempts)

    def wait(self) -> None:
        """Return once the chunk handed over last is queued (or its failure logged)."""
        last, self._last = self._last, None
        if last is not None:
            last.result()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.wait()
        self._pool.shutdown()


def _send(client, attempts: list[tuple[int, int, int, int]]) -> None:
    try:
        queueing.enqueue_many_now(attempts, client=client)
    except Exception as error:  # noqa: BLE001 - any transport failure is recoverable by the reconciler
        log.warning("%d replayed runs committed but not queued (%s); the reconciler will queue them",
                    len(attempts), error)


def first_attempts(rows: list) -> list[tuple[int, int, int, int]]:
    """Return (run_id, series, attempt, timeout_s) of the first attempt of each restarted run's new series."""
    timeouts: dict[tuple, int] = {}

    def timeout_s(row) -> int:
        # Nearly every run has no overrides: then the policy alone decides, with no JSON to key on.
        overrides = row.policy_overrides
        key = (row.policy_id, json.dumps(overrides, sort_keys=True, default=str) if overrides else "")
        if key not in timeouts:
            timeouts[key] = policies.effective(row.policy_id, overrides)[1].timeout_s
        return timeouts[key]

    return [(row.id, row.series + 1, 0, timeout_s(row)) for row in rows]
