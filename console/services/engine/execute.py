"""Execute one attempt: claim the run, call its handler under a timeout, record what happened."""

import functools
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from types import SimpleNamespace

from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty
from sqlalchemy import bindparam, func, select, update

from console.domain.breaker import BreakerSettings
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import HandlerTimeout, NonRetryableError, classify
from console.domain.windows import Window
from console.extensions import db
from console.models import Run, Task, Tenant
from console.services.delivery import outbox
from console.services.engine import breakers, handler_kinds, isolation, queueing, transitions
from console.services.engine.context import HandlerContext
from console.services.engine.failures import fail
from console.services.engine.heartbeat import Heartbeat
from console.services.engine.results import json_safe
from console.services.errors import NotFound
from console.services.policies import versions as policies
from console.services.settings import setting

log = logging.getLogger("rebound.engine")
DEFER_S = 1.0
WORKER_ID = f"{socket.gethostname()}.{os.getpid()}"


# The hot path reads the run as a plain row: the ORM's loading machinery cost more than SQLite's read (18% of an
# attempt). A failure loads the ORM object, which dead letters and compensation work with.
_RUN_ROW = select(Run.__table__).where(Run.__table__.c.id == bindparam("run_id"))
_TASK_NAME = select(Task.name).where(Task.id == bindparam("task_id"))


class RunRow(SimpleNamespace):
    """A run's columns as attributes, read on the hot path; transitions.move() keeps them current."""


def _load(run_id: int) -> RunRow | None:
    row = db.session.connection().execute(_RUN_ROW, {"run_id": run_id}).one_or_none()
    return None if row is None else RunRow(**row._mapping)


@dataclass(frozen=True)
class Admission:
    """What an attempt is admitted by, read in one query: the policy version in force and the running counts."""

    policy_id: int | None
    policy_version: int | None
    own_running: int
    tenant_running: int
    max_running: int


@functools.lru_cache(maxsize=4)
def _admission_query(by_policy_id: bool, by_task: bool):
    """Build once (this runs on every attempt) the admission query for runs with/without a policy and a task."""
    runs, tenants = Run.__table__, Tenant.__table__
    in_force = policies.IN_FORCE_BY_ID if by_policy_id else policies.IN_FORCE_DEFAULT
    same_work = runs.c.task_id == bindparam("task_id") if by_task else runs.c.handler == bindparam("handler")
    running = select(func.count()).select_from(runs).where(runs.c.status == "running")
    return select(
        in_force.with_only_columns(in_force.selected_columns.id).scalar_subquery(),
        in_force.with_only_columns(in_force.selected_columns.current_version).scalar_subquery(),
        running.where(same_work).scalar_subquery(),
        running.where(runs.c.tenant_id == bindparam("tenant_id")).scalar_subquery(),
        select(tenants.c.max_running).where(tenants.c.id == bindparam("tenant_id")).scalar_subquery())


def _admission(run: RunRow) -> Admission:
    query = _admission_query(run.policy_id is not None, run.task_id is not None)
    row = db.session.connection().execute(query, {"policy_id": run.policy_id, "task_id": run.task_id,
                                                  "handler": run.handler, "tenant_id": run.tenant_id}).one()
    return Admission(*row)


def _over_capacity(admission: Admission, concurrency: int) -> str | None:
    """Name the limit that is full (the task's concurrency or the tenant's max_running), if any."""
    # Counted, then claimed: two workers racing may overshoot by one; the limits are for load, not safety.
    if admission.own_running >= concurrency:
        return "concurrency"
    return "quota" if admission.tenant_running >= admission.max_running else None


def _tenant_name(tenant_id: int) -> str:
    return _tenant_name_in(str(db.engine.url), tenant_id)


@functools.lru_cache(maxsize=1024)
def _tenant_name_in(database: str, tenant_id: int) -> str:
    # Tenants are never renamed, so a process may remember their names (per database: tests use many).
    return db.session.execute(select(Tenant.name).where(Tenant.id == tenant_id)).scalar_one()


def _call(fn, ctx: HandlerContext, timeout_s: int):
    """Call handler code; a hung one is stopped at timeout_s and counted as a timeout.

    A fork worker (ISOLATE_HANDLERS) calls it in a child process; otherwise it runs here under SIGALRM, as RQ does.
    """
    if setting("ISOLATE_HANDLERS"):
        return isolation.call_forked(fn, ctx, timeout_s)
    if threading.current_thread() is not threading.main_thread():
        return fn(ctx)  # signals only reach the main thread; RQ workers always call us there
    try:
        with UnixSignalDeathPenalty(int(timeout_s), JobTimeoutException):
            return fn(ctx)
    except JobTimeoutException:
        raise HandlerTimeout(message=f"handler ran past its {timeout_s} s timeout and was stopped") from None


# A deferred pending run notes when it is due: the reconciler finds the deferral's job by it (queueing.job_id).
_NOTE_DUE = (update(Run.__table__)
             .where(Run.id == bindparam("run_id"), Run.status == "pending",
                    Run.attempt == bindparam("expected_attempt"))
             .values(next_retry_at=bindparam("due")))


def _defer(run: RunRow, when, timeout_s: int) -> None:
    """Put a pending run off until `when` without spending an attempt."""
    db.session.connection().execute(_NOTE_DUE, {"run_id": run.id, "expected_attempt": run.attempt, "due": when})
    db.session.commit()
    queueing.enqueue_at(when, run.id, run.series, run.attempt, timeout_s, deferral=True)


def undo_call(invocation, timeout_s: int):
    """Return the handler's undo step, called like the handler itself (isolated, under the same timeout)."""
    if invocation is None or invocation.compensate is None:
        return None
    return functools.partial(_call, invocation.compensate, timeout_s=timeout_s)


def execute(run_id: int, expected_attempt: int, *, clock: Clock = SYSTEM_CLOCK, worker_id: str = WORKER_ID) -> str:
    """Claim and run one attempt; return what became of the run (or why nothing was done)."""
    run = _load(run_id)
    if run is None:
        return "missing"
    if run.attempt != expected_attempt or run.status not in ("pending", "retry_wait"):
        return "skipped"  # a duplicate or stale delivery: someone already took this attempt
    now = clock()
    admission = _admission(run)
    if admission.policy_version is None:
        raise NotFound(f"retry policy {run.policy_id or policies.DEFAULT} is missing")
    version = admission.policy_version
    policy = policies.of_version(admission.policy_id, version, run.policy_overrides)
    try:
        if run.cancel_requested:
            transitions.move(run, "cancelled", now, reason="cancel_requested", finished_at=now)
            db.session.commit()
            return "cancelled"
        if run.status == "retry_wait":
            transitions.move(run, "pending", now, reason="timer")
        task = db.session.get(Task, run.task_id) if run.status_reason == "window" and run.task_id else None
        if task is not None and task.window:
            # Deferred to its window; a job that arrives early (a re-queue after a Redis loss) waits again.
            opening = Window.from_mapping(task.window).next_opening(now)
            if opening > now:
                _defer(run, opening, policy.timeout_s)
                return "deferred:window"
        full = _over_capacity(admission, policy.concurrency)
        if full:
            _defer(run, now + timedelta(seconds=DEFER_S), policy.timeout_s)
            return f"deferred:{full}"
        settings = BreakerSettings.from_policy(policy)
        verdict = breakers.allow(run.handler, now, settings)
        if not verdict.allowed:
            transitions.move(run, "retry_wait", now, reason="breaker_open", next_retry_at=verdict.retry_at)
            db.session.commit()
            queueing.enqueue_at(verdict.retry_at, run.id, run.series, run.attempt, policy.timeout_s, deferral=True)
            return "breaker_open"
        token = uuid.uuid4().hex
        transitions.move(run, "running", now, attempt=run.attempt + 1, executions=run.executions + 1,
                         retry_token=token, worker_id=worker_id, started_at=run.started_at or now, heartbeat_at=now,
                         policy_version=version, progress=0, progress_message=None, next_retry_at=None,
                         data={"policy_version": version})
        db.session.commit()  # write-ahead: the claim is durable before the handler's side effects
    except transitions.StaleRun:
        return "skipped"
    return _perform(run, policy, settings, verdict.clean, clock)


def _note_dropped_success(run: RunRow, now, duration_ms: int) -> None:
    """Record that a handler succeeded in an attempt the engine had given up: a later success repeats its effect."""
    # The duplicate-execution figure counts these; the run's status stays what the engine made it.
    transitions.event(run, "stale_success", now, duration_ms=duration_ms,
                      message="the handler succeeded after this attempt was given up; its result was dropped")
    db.session.commit()


def _as_orm(row: RunRow) -> Run:
    """Return the ORM object of a run read as a row, if it still is as the row says; else raise StaleRun."""
    run = db.session.get(Run, row.id)
    if (run.status, run.attempt, run.series) != (row.status, row.attempt, row.series):
        raise transitions.StaleRun(f"run {row.id} is no longer {row.status} at attempt {row.attempt}")
    return run


def _task_name(task_id: int | None) -> str | None:
    # Read per attempt, not remembered: a task may be renamed.
    if task_id is None:
        return None
    return db.session.connection().execute(_TASK_NAME, {"task_id": task_id}).scalar_one_or_none()


def context_for(run: Run | RunRow, timeout_s: int) -> HandlerContext:
    """Return what the run's handler (or its compensation) is given."""
    return HandlerContext(
        run_id=run.id, tenant=_tenant_name(run.tenant_id), task=_task_name(run.task_id),
        handler=run.handler, params=dict(run.params or {}), attempt=run.attempt, series=run.series,
        execution=run.executions, idempotency_key=run.idempotency_key, retry_token=run.retry_token or "",
        trace_id=run.trace_id, timeout_s=timeout_s)


def _perform(run: RunRow, policy, settings: BreakerSettings, breaker_was_clean: bool, clock: Clock) -> str:
    ctx = context_for(run, policy.timeout_s)
    try:
        invocation = handler_kinds.resolve(run.handler)
    except NonRetryableError as error:
        invocation, resolve_error = None, error
    started = time.monotonic()
    result, error = None, None
    if invocation is None:
        error = resolve_error
    else:
        with Heartbeat(run.id, run.attempt, setting("HEARTBEAT_S"), ctx.cancel_event):
            try:
                result = _call(invocation.run, ctx, policy.timeout_s)
            except Exception as exc:  # noqa: BLE001 - every handler error is classified, none is swallowed
                error = exc
    duration_ms = int((time.monotonic() - started) * 1000)
    now = clock()
    try:
        # Guarded by status and attempt: if the reconciler gave this attempt up meanwhile, the outcome is dropped.
        if error is None and ctx.cancelled():
            transitions.move(run, "cancelled", now, reason="cancel_requested", finished_at=now,
                             result=json_safe(result), duration_ms=duration_ms)
        elif error is None:
            transitions.move(run, "succeeded", now, reason=None, finished_at=now, result=json_safe(result),
                             progress=100, duration_ms=duration_ms)
        if error is None:
            db.session.commit()
        else:
            run = _as_orm(run)  # the failure paths (dead letters, compensation) work on the ORM object
            # A compensation runs here, inline: its heartbeat tells the reconciler whether this worker still lives.
            with Heartbeat(run.id, run.attempt, setting("HEARTBEAT_S"), ctx.cancel_event):
                fail(run, classify(error, policy), policy, now, duration_ms=duration_ms,
                     compensate=undo_call(invocation, policy.timeout_s), ctx=ctx)
    except transitions.StaleRun:
        log.warning("run %s moved on while attempt %s ran; its outcome is dropped", run.id, ctx.attempt)
        if error is None:
            _note_dropped_success(run, now, duration_ms)
        return "stale"
    change = breakers.record(run.handler, error is None, now, settings, clean_before=breaker_was_clean)
    if change == "opened":
        outbox.add("alert", f"breaker:{run.handler}", {
            "rule": "breaker_opened", "handler": run.handler, "tenant_id": run.tenant_id,
            "open_s": settings.open_s, "at": now.isoformat()}, now)
        db.session.commit()
    elif change == "closed":
        # The cause has cleared: resolve the PagerDuty incident the "opened" alert started (same key).
        outbox.resolve(f"rebound-breaker:{run.handler}", f"Circuit breaker opened: {run.handler}",
                       f"{run.handler} answers again: its circuit breaker closed.", now, handler=run.handler)
        db.session.commit()
    return run.status
