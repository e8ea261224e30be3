"""Failures, successes and progress reported by external executors (events task.execution.failed / .updated)."""

import uuid

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import MAX_RETRY_AFTER_S, classify_reported
from console.domain.secrets import held_in, holding, redact
from console.extensions import db
from console.models import Run, RunEvent, Tenant
from console.services.actor import Actor
from console.services.engine import handler_kinds, transitions
from console.services.engine.execute import kept_result
from console.services.engine.failures import fail
from console.services.engine.submit import _policy_choice, _same_work, effective_policy, find_by_key, task_for
from console.services.errors import Conflict, InvalidInput, NotFound
from console.services.inputs import key_refusal, params_too_large
from console.services.policies import versions as policies
from console.services.policies.tenant_overrides import keep_breaker_to_tenant

# What a failure report reads of an update that ends its attempt as failed (task.execution.updated, status failed).
FAILURE_FIELDS = ("idempotency_key", "error_code", "message", "retryable", "retry_after_s", "retry_token")


def _text(data: dict, name: str, limit: int, required: bool = False) -> str | None:
    value = data.get(name)
    if value is None and not required:
        return None
    if value is None:
        raise InvalidInput(f"{name} is required: a string of 1-{limit} characters", name)
    if not isinstance(value, str) or not value or len(value) > limit:
        raise InvalidInput(f"{name} must be a string of 1-{limit} characters", name)
    return value


def report_failure(tenant: Tenant, data: dict, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> tuple[Run, bool]:
    """Put an externally failed execution into the retry flow: retry later, or dead-letter it; return the run and
    whether this was the same report sent again (it changed nothing)."""
    key = _text(data, "idempotency_key", 200, required=True)
    if refused := key_refusal(key):  # the key of a run it may create, as a submit's
        raise refused
    code = _text(data, "error_code", 80, required=True)
    message = data.get("message") or ""
    retryable = data.get("retryable")
    if retryable is not None and not isinstance(retryable, bool):
        raise InvalidInput("retryable must be true or false", "retryable")
    retry_after = data.get("retry_after_s")
    if retry_after is not None and (isinstance(retry_after, bool) or not isinstance(retry_after, int | float)
                                    or not 0 <= retry_after <= MAX_RETRY_AFTER_S):
        raise InvalidInput(f"retry_after_s must be a number of seconds from 0 to {MAX_RETRY_AFTER_S} (30 days)",
                           "retry_after_s")
    token = _text(data, "retry_token", 64)
    if data.get("task_id") is not None and data.get("handler") is not None:
        raise InvalidInput("give exactly one of handler or task_id", "handler")  # the handler was dropped unsaid
    now = clock()
    run = find_by_key(tenant.id, key)
    known = run is not None
    if not known:
        try:
            run = _external_run(tenant, data, key, actor, now)
        except IntegrityError:
            # The same report sent again at once (an executor's retry after a timeout) created the run first: this
            # one is about that run, a duplicate below, not a 409 "someone else changed this" (helper 152).
            db.session.rollback()
            run = find_by_key(tenant.id, key)
            if run is None:
                raise
            known = True
    # The code as the run and its timeline keep it: masked as classify masks it (a secret param used as a code
    # was masked on the run and shown on its timeline; helper 134). Reports sent again are matched by it.
    with holding(held_in(run.params)):
        code = redact(code.strip()) or "unknown"
    if known:
        if data.get("task_id") is not None or data.get("handler") is not None:
            # The key names other work than the one reported (a sent-again report for it was taken as a duplicate).
            task = task_for(data["task_id"], tenant) if data.get("task_id") is not None else None
            _same_work(run, data.get("handler"), task, key)
        if token is not None and token != run.retry_token:
            # A report names its attempt by its token: attempt 1's report sent again during attempt 2 failed attempt
            # 2, and a healthy run died (helper 113).
            return run, _earlier_attempt(run, token, code)
    if run.status != "running":
        if _reported_already(run, code):
            return run, True  # the executor's retry of a report that landed (a timeout on its side)
        raise Conflict(f"run {run.id} is {run.status}; only a running run can fail "
                       "(use POST /internal/tasks/retry for dead or failed runs)", "idempotency_key")
    _, policy = policies.effective(run.policy_id, run.policy_overrides)
    with holding(held_in(run.params)):  # the executor was given the run's secrets, and may name one
        failure = classify_reported(code, str(message)[:2000], retryable, policy, retry_after_s=retry_after)
    transitions.event(run, "failure_reported", now, actor=actor.name, error_code=failure.code,
                      message=failure.message)
    try:
        fail(run, failure, policy, now)
    except transitions.StaleRun:
        # The same report sent again at once (an executor's retry racing its first send) lost to that first: a
        # duplicate, as it would be a moment later, not a 409 (helper 104). Another change of the run stays a 409.
        db.session.expire_all()
        moved = find_by_key(tenant.id, key)
        if moved is not None and _reported_already(moved, code):
            return moved, True
        raise
    return run, False


def _earlier_attempt(run: Run, token: str, code: str) -> bool:
    """Answer a report whose token is not the run's current attempt's: True (a duplicate, nothing changes) when that
    earlier attempt's failure was reported with this code; a 409 otherwise, naming what to send."""
    reported = db.session.execute(select(RunEvent.attempt).where(
        RunEvent.run_id == run.id, RunEvent.kind == "failure_reported", RunEvent.retry_token == token,
        RunEvent.error_code == code).limit(1)).scalar_one_or_none()
    if reported is not None:
        return True
    known = db.session.execute(select(RunEvent.attempt).where(
        RunEvent.run_id == run.id, RunEvent.retry_token == token).order_by(RunEvent.id.desc()).limit(1)
    ).scalar_one_or_none()
    said = (f"it is attempt {known}'s, which is over" if known is not None
            else "no attempt of this run has it")
    raise Conflict(f"retry_token is not run {run.id}'s current attempt's ({said}; the run is at attempt {run.attempt}, "
                   f"{run.status}): nothing changed. Send the token of the attempt that failed", "retry_token")


def _reported_already(run: Run, code: str) -> bool:
    """Tell whether this failure of the run's current attempt was reported, whatever was done to the run since (a
    person's cancel of its retry answered the executor's resend with a 409; helper 152)."""
    return db.session.execute(select(RunEvent.id).where(
        RunEvent.run_id == run.id, RunEvent.kind == "failure_reported", RunEvent.error_code == code,
        RunEvent.attempt == run.attempt, RunEvent.series == run.series).limit(1)).first() is not None


def _external_run(tenant: Tenant, data: dict, key: str, actor: Actor, now) -> Run:
    """Record an attempt Rebound did not run itself, so Rebound can retry it with the given handler or task."""
    task = None
    if data.get("task_id") is not None:
        task = task_for(data["task_id"], tenant)
    elif data.get("handler") is None:
        raise NotFound(f"no run with idempotency key {key!r}; send handler or task_id to let Rebound retry it")
    handler = handler_kinds.normalise(task.handler if task else data["handler"])
    keep_breaker_to_tenant(data.get("policy"), actor)
    policy_id, overrides = _policy_choice(data.get("policy"), task)
    version, _ = effective_policy(policy_id, overrides)
    retry_token = _text(data, "retry_token", 64)
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise InvalidInput("params must be a JSON object", "params")
    if params and (too_large := params_too_large(params)):  # as a submit's: 3.5 MB of params were kept (helper 152)
        raise InvalidInput(too_large, "params")
    run = Run(tenant_id=tenant.id, task_id=task.id if task else None, handler=handler,
              params={**(task.params if task else {}), **params}, policy_id=policy_id, policy_version=version,
              policy_overrides=overrides, idempotency_key=key, status="running", attempt=1, executions=1,
              retry_token=retry_token or uuid.uuid4().hex, started_at=now, enqueued_at=now,
              scheduled_for=now, created_at=now, updated_at=now, heartbeat_at=now, trace_id=uuid.uuid4().hex,
              source="external", worker_id="external")
    db.session.add(run)
    db.session.flush()
    transitions.event(run, "external_attempt", now, to_status="running", actor=actor.name)
    return run


def report_success(tenant: Tenant, data: dict, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> tuple[Run, bool]:
    """Record that an executor finished a running run's attempt, with its result (seed 001's task.execution.updated
    carries "progress, result, error code"); return the run and whether this was the same report sent again."""
    key = _text(data, "idempotency_key", 200, required=True)
    token = _text(data, "retry_token", 64)
    run = find_by_key(tenant.id, key)
    if run is None:
        raise NotFound(f"no run with idempotency key {key!r}")
    if token is not None and token != run.retry_token:
        raise Conflict(f"retry_token is not run {run.id}'s current attempt's (it is at attempt {run.attempt}, "
                       f"{run.status}): nothing changed", "retry_token")
    with holding(held_in(run.params)):  # the executor was given the run's secrets, and its result may repeat one
        result, message = kept_result(data.get("result")), _message(data)
    if run.status != "running":
        # Sent again after a timeout: this attempt's success was reported, whatever was noted since (the worker's own
        # outcome of it arriving later, dropped as stale, added a row: the resend was a 409).
        if run.status == "succeeded" and db.session.execute(select(RunEvent.id).where(
                RunEvent.run_id == run.id, RunEvent.kind == "success_reported", RunEvent.attempt == run.attempt,
                RunEvent.series == run.series).limit(1)).first():
            if "result" in data and result != run.result:
                # Another result for the same attempt was a 200 "duplicate" that dropped it unsaid (helper 152).
                raise Conflict(f"run {run.id}'s attempt {run.attempt} was reported succeeded with another result; "
                               "nothing changed. Read the run for the result it kept", "result")
            return run, True
        raise Conflict(f"run {run.id} is {run.status}; only a running run's attempt can be reported done",
                       "idempotency_key")
    now = clock()
    transitions.event(run, "success_reported", now, actor=actor.name)
    try:
        transitions.move(run, "succeeded", now, reason=None, finished_at=now, result=result, progress=100,
                         progress_message=message or run.progress_message)
    except transitions.StaleRun:
        db.session.rollback()
        raise Conflict(f"run {run.id} changed while this report was recorded: nothing changed; read it again",
                       "idempotency_key") from None
    db.session.commit()
    return run, False


def _message(data: dict) -> str | None:
    """Return an executor's status text as a viewer may read it: masked as a failure's message is (its URLs, tokens,
    the run's secret params held), then cut to the column (helper 134: a connection string reached every viewer)."""
    return redact(data["message"])[:255] if isinstance(data.get("message"), str) else None


def report_update(tenant: Tenant, data: dict, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> Run:
    """Record progress (and a message) an executor reports for a running run."""
    key = _text(data, "idempotency_key", 200, required=True)
    run = find_by_key(tenant.id, key)
    if run is None:
        raise NotFound(f"no run with idempotency key {key!r}")
    progress = data.get("progress")
    whole = isinstance(progress, int) and not isinstance(progress, bool)
    if progress is not None and not (whole and 0 <= progress <= 100):
        raise InvalidInput("progress must be a whole number from 0 to 100", "progress")
    token = _text(data, "retry_token", 64)
    if token is not None and token != run.retry_token:
        # An earlier attempt's executor, still reporting, wrote its progress over the current attempt's (helper 152).
        raise Conflict(f"retry_token is not run {run.id}'s current attempt's (it is at attempt {run.attempt}, "
                       f"{run.status}): nothing changed", "retry_token")
    if run.status != "running":
        raise Conflict(f"run {run.id} is {run.status}; progress is recorded for running runs only", "idempotency_key")
    with holding(held_in(run.params)):
        message = _message(data)
    # What the executor left out keeps its stored value (the column itself), not the value read above.
    db.session.execute(update(Run).where(Run.id == run.id, Run.status == "running").values(
        heartbeat_at=clock(), progress=Run.progress if progress is None else progress,
        progress_message=Run.progress_message if message is None else message))
    db.session.commit()
    return run
