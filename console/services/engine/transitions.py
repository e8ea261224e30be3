"""Every status change of a run, one or many: checked against the table, guarded, and written to the timeline.

This module is the only writer of `runs.status` and `runs.cancel_requested` (tests/unit/test_one_status_writer.py).
"""

import functools
import logging
from datetime import datetime

from sqlalchemy import String, bindparam, case, cast, insert, null, select, update
from sqlalchemy.orm import aliased
from sqlalchemy.orm.attributes import set_committed_value

from console import metrics
from console.db.id_lists import among, ids_param
from console.db.prepared import Prepared
from console.domain.statuses import check_transition
from console.domain.windows import opening_keys
from console.extensions import db
from console.logs import run_fields
from console.models import Run, RunEvent
from console.services.engine import followups
from console.services.engine.transition_lines import log_at_commit
from console.services.errors import Conflict

log = logging.getLogger("rebound.runs")
# Statuses that need a person: logged as warnings, the rest as info.
NEEDS_A_PERSON = frozenset({"dead", "compensation_failed"})

# Core statements on the tables: this is the hot path, and the ORM's bulk-update machinery costs more
# than the SQL itself. The session's connection keeps them in the caller's transaction.
RUNS, EVENTS = Run.__table__, RunEvent.__table__
# Every timeline row names all of these, so one INSERT statement (compiled once) serves every event.
EVENT_COLUMNS = ("run_id", "at", "kind", "attempt", "series", "executions", "retry_token", "worker_id", "from_status",
                 "to_status", "reason", "error_code", "message", "next_retry_at", "duration_ms", "actor", "data")
INSERT_EVENT = insert(EVENTS)
_INSERT_ONE_EVENT = Prepared(INSERT_EVENT, EVENT_COLUMNS)


class StaleRun(Conflict):
    """The run moved on (another worker, a cancel, the reconciler, another person) since it was read.

    A Conflict: a person's change that lost such a race gets a 409 saying so, not a 500.
    """


def event_row(**fields) -> dict:
    """Return a timeline row naming every column (None where not given), for INSERT_EVENT."""
    return {**dict.fromkeys(EVENT_COLUMNS), "executions": 0, **fields}


def event(run: Run, kind: str, now: datetime, **fields) -> None:
    """Append one timeline entry for the run's current attempt (in the caller's transaction)."""
    # A plain INSERT: the timeline is append-only, so the unit of work has nothing to track.
    _INSERT_ONE_EVENT.execute(db.session.connection(), event_row(
        run_id=run.id, at=now, kind=kind, attempt=run.attempt, series=run.series, executions=run.executions,
        retry_token=run.retry_token, worker_id=run.worker_id, **fields))


@functools.lru_cache(maxsize=256)
def _guarded_update(columns: tuple[str, ...]) -> Prepared:
    """Return the UPDATE of these columns guarded by status, attempt and series, built once per column set."""
    # Building a statement and its cache key costs more than SQLite running it; the bound values vary.
    return Prepared(update(RUNS)
                    .where(RUNS.c.id == bindparam("g_id"), RUNS.c.status == bindparam("g_status"),
                           RUNS.c.attempt == bindparam("g_attempt"), RUNS.c.series == bindparam("g_series"))
                    .values({name: bindparam(f"v_{name}", type_=RUNS.c[name].type) for name in columns}))


# Event columns the moved row supplies (as the UPDATE left it); the rest are bound per transition.
_FROM_RUN = {"run_id": "id", "attempt": "attempt", "series": "series", "executions": "executions",
             "retry_token": "retry_token", "worker_id": "worker_id"}
_BOUND = tuple(name for name in EVENT_COLUMNS if name not in _FROM_RUN)


@functools.lru_cache(maxsize=256)
def _guarded_move(columns: tuple[str, ...]) -> Prepared:
    """Return, for PostgreSQL, the guarded UPDATE and its timeline INSERT as one statement (one round trip)."""
    # A data-modifying CTE: the timeline row is inserted only if the guarded UPDATE changed the run, so the
    # INSERT's row count is the UPDATE's. SQLite has no such CTE; it runs the two statements (same transaction).
    moved = (_guarded_update(columns).statement.returning(*(RUNS.c[column] for column in _FROM_RUN.values()))
             .cte("moved"))
    values = {name: moved.c[column] for name, column in _FROM_RUN.items()}
    values.update({name: bindparam(f"e_{name}", type_=EVENTS.c[name].type) for name in _BOUND})
    names = tuple(values)
    return Prepared(insert(EVENTS).from_select(names, select(*(values[name] for name in names))
                                               .select_from(moved)))


def _move_row(run, source: str, changes: dict, event: dict) -> int:
    """Write the guarded change and its timeline row; return how many runs changed (0: someone else won)."""
    connection = db.session.connection()
    guard = {"g_id": run.id, "g_status": source, "g_attempt": run.attempt, "g_series": run.series,
             **{f"v_{name}": value for name, value in changes.items()}}
    columns = tuple(sorted(changes))
    if connection.dialect.name == "postgresql":
        return _guarded_move(columns).execute(connection, {**guard, **{f"e_{name}": event.get(name)
                                                                      for name in _BOUND}}).rowcount
    changed = _guarded_update(columns).execute(connection, guard).rowcount
    if changed == 1:
        # The timeline row carries the run's values as the UPDATE left them (the attempt it now counts).
        _INSERT_ONE_EVENT.execute(connection, event_row(
            run_id=run.id, attempt=changes.get("attempt", run.attempt), series=changes.get("series", run.series),
            executions=changes.get("executions", run.executions),
            retry_token=changes.get("retry_token", run.retry_token), worker_id=changes.get("worker_id", run.worker_id),
            **event))
    return changed


def move(run: Run, target: str, now: datetime, *, reason: str | None = None, error_code: str | None = None,
         message: str | None = None, duration_ms: int | None = None, actor: str | None = None,
         data: dict | None = None, clear_error: bool = False, **values) -> None:
    """Change a run's status if it is still as read; raise StaleRun if someone else changed it first."""
    check_transition(run.status, target)
    source = run.status
    if error_code is not None:
        values["error_code"] = error_code
    if clear_error or target == "succeeded":
        # A run that succeeded, or starts a new series, carries no error from earlier attempts.
        values.update(error_code=None, error_message=None)
    # One conditional update: the status and attempt we read must still hold, or another process won.
    changes = {"status": target, "status_reason": reason, "updated_at": now, **values}
    changed = _move_row(run, source, changes, {
        "at": now, "kind": target, "from_status": source, "to_status": target, "reason": reason,
        "error_code": error_code, "message": message, "next_retry_at": values.get("next_retry_at"),
        "duration_ms": duration_ms, "actor": actor, "data": data})
    if changed != 1:
        db.session.rollback()
        raise StaleRun(f"run {run.id} changed meanwhile: it is no longer {source} at attempt {run.attempt}; "
                       f"reload it to see what it is now", "status")
    metrics.transition(run, source, target, now, reason, error_code, values)
    if target in followups.SIGNALS and run.workflow_id is not None:
        followups.note(db.session, run.workflow_id)
    # Mirror the update on the object: an ORM run without marking it dirty, so the ORM does not write it again.
    mirror = set_committed_value if hasattr(run, "_sa_instance_state") else setattr
    for key, value in changes.items():
        mirror(run, key, value)
    level = logging.WARNING if target in NEEDS_A_PERSON else logging.INFO
    if log.isEnabledFor(level):  # the seed fields are gathered only for a line that is written
        log_at_commit(db.session, log, level, "run %s: %s → %s%s", run.id, source, target,
                      f" ({reason})" if reason else "", extra=run_fields(run, reason, error_code, duration_ms))


def move_many(source: str, target: str, run_ids: list[int], now: datetime, *, reason: str,
              actor: str | None = None, message: str | None = None, guard=None, clear_error: bool = False,
              columns: tuple[str, ...] | None = None, **values) -> list:
    """Change every run still `source` to `target` in one guarded UPDATE; return the changed rows as now stored.

    A run no longer `source` (or failing `guard`, a SQL condition) is left alone. Each changed run gets what
    `move` gives one run: metrics, a log line and its timeline row. Values may be SQL expressions
    (`series=RUNS.c.series + 1`); RETURNING reads back what they became. A bulk caller names the `columns` it
    needs back: only those are read back, and the move logs one line for all its runs instead of one each.
    """
    check_transition(source, target)
    if not run_ids:
        return []
    if clear_error or target == "succeeded":
        values.update(error_code=None, error_message=None)
    connection = db.session.connection()
    dialect = connection.dialect.name
    statement = update(RUNS).where(among(RUNS.c.id, run_ids, dialect), RUNS.c.status == source)
    if guard is not None:
        statement = statement.where(guard)
    if dialect == "postgresql":
        # An UPDATE locks its rows in whatever order its plan reads them; two movers of overlapping runs (a bulk
        # replay and a resolve) could each hold a run the other wants. Every mover takes them in id order first.
        connection.execute(select(RUNS.c.id).where(among(RUNS.c.id, run_ids, dialect), RUNS.c.status == source)
                           .order_by(RUNS.c.id).with_for_update())
    # RETURNING gives rows in no promised order on PostgreSQL: in id order, metrics, log lines and callers see the
    # same sequence on both databases and from one run to the next.
    rows = sorted(connection.execute(statement.values(status=target, status_reason=reason, updated_at=now, **values)
                                     .returning(*_returned(target, columns))).all(), key=lambda row: row.id)
    error_code = values.get("error_code")
    level = logging.WARNING if target in NEEDS_A_PERSON else logging.INFO
    each = columns is None and log.isEnabledFor(level)
    for row in rows:
        metrics.transition(row, source, target, now, reason, error_code, {"attempt": row.attempt})
        if target in followups.SIGNALS and row.workflow_id is not None:
            followups.note(db.session, row.workflow_id)
        if each:
            log_at_commit(db.session, log, level, "run %s: %s → %s (%s)", row.id, source, target, reason,
                          extra=run_fields(row, reason, error_code, None))
    if rows and columns is not None and log.isEnabledFor(level):
        ids = sorted(row.id for row in rows)
        shown = ", ".join(map(str, ids[:10])) + (f" … {ids[-1]}" if len(ids) > 10 else "")
        log_at_commit(db.session, log, level, "%d runs: %s → %s (%s): %s", len(rows), source, target, reason, shown)
    if rows:
        # Read from the rows just written, in the database: no timeline row is built in Python.
        connection.execute(_timeline_of_moved(dialect), {
            "ids": [row.id for row in rows], "at": now, "kind": target, "from_status": source, "to_status": target,
            "reason": reason, "error_code": error_code, "message": message, "actor": actor})
    return rows


# What metrics.transition and the workflow follow-ups read of a moved run (the moments only for `running`).
_COUNTED = ("id", "tenant_id", "handler", "task_id", "attempt", "workflow_id")


def _returned(target: str, columns: tuple[str, ...] | None) -> list:
    if columns is None:
        return list(RUNS.c)
    counted = (*_COUNTED, "next_retry_at", "enqueued_at") if target == "running" else _COUNTED
    return [RUNS.c[name] for name in dict.fromkeys((*counted, *columns))]


def _constant(name: str):
    return bindparam(name, type_=EVENTS.c[name].type)


@functools.lru_cache(maxsize=2)
def _timeline_of_moved(dialect: str):
    """One timeline row per moved run, as event_row() would build it from the run's row after the UPDATE."""
    return insert(EVENTS).from_select(EVENT_COLUMNS, select(
        RUNS.c.id, _constant("at"), _constant("kind"), RUNS.c.attempt, RUNS.c.series, RUNS.c.executions,
        RUNS.c.retry_token,
        RUNS.c.worker_id, _constant("from_status"), _constant("to_status"), _constant("reason"),
        _constant("error_code"), _constant("message"), RUNS.c.next_retry_at, null(), _constant("actor"), null(),
    ).where(among(RUNS.c.id, ids_param("ids", dialect), dialect)).order_by(RUNS.c.id))


def request_cancel(run: Run, now: datetime, *, actor: str | None = None, kind: str = "cancel_requested",
                   reason: str | None = None, message: str | None = None) -> bool:
    """Ask a running run to stop at its next check; tell whether it was still running to be asked."""
    changed = db.session.connection().execute(
        update(RUNS).where(RUNS.c.id == run.id, RUNS.c.status == "running").values(cancel_requested=True)).rowcount
    if changed:
        mirror = set_committed_value if hasattr(run, "_sa_instance_state") else setattr
        mirror(run, "cancel_requested", True)
        event(run, kind, now, actor=actor, reason=reason, message=message)
    return bool(changed)


def release_from_window(task_id: int, now: datetime, *, actor: str, message: str) -> Run | None:
    """Start the task's oldest run waiting for its execution window now: due now, no longer waiting, with its
    timeline row, in the caller's transaction; return it (None when none waits)."""
    waiting = aliased(Run)  # not correlated with the UPDATE's own table
    oldest = (select(waiting.id).where(waiting.task_id == task_id, waiting.status == "pending",
                                       waiting.status_reason == "window").order_by(waiting.id).limit(1)
              .scalar_subquery())
    # A cron run waiting for an opening holds that opening's key (windows.opening_key): it lets the key go, or
    # the cron firings after it would join a run that has already run, and none would start at the opening.
    opening_key = Run.idempotency_key.startswith(opening_keys(task_id), autoescape=True)
    # Suffixed with the run's own id: the next run waiting for the same opening lets its key go too, when released.
    released_key = Run.idempotency_key + "~released:" + cast(Run.id, String)
    # Guarded: a worker taking it at the window's opening meanwhile leaves it to that worker. Its deferral's due time
    # goes (next_retry_at): the reconciler would look for that job, find it scheduled, and never queue the run anew.
    run_id = db.session.execute(
        update(Run).where(Run.id == oldest, Run.status == "pending", Run.status_reason == "window")
        .values(status_reason=None, due_at=now, enqueued_at=now, updated_at=now, next_retry_at=None,
                # What it last waited for goes too: released, it read "waits for the window to open at 20:00" until a
                # worker took it (helper 157).
                wait_reason=None, idempotency_key=case((opening_key, released_key), else_=Run.idempotency_key))
        .returning(Run.id).execution_options(synchronize_session=False)).scalar()
    if run_id is None:
        return None
    run = db.session.get(Run, run_id, populate_existing=True)
    event(run, "released", now, reason="outside_window", message=message, actor=actor)
    return run
