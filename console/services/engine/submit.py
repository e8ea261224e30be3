"""Submit work: validate, deduplicate by idempotency key, enforce limits, commit, then enqueue."""

import logging
import uuid
from datetime import datetime

from sqlalchemy import bindparam, func, insert, inspect, literal, literal_column, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import make_transient_to_detached

from console.db import locks
from console.db.prepared import Prepared, default_value
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.policy import PolicyError, RetryPolicy, sla_out_of_order, too_long_codes
from console.domain.words import agree, plural, said_back
from console.extensions import db
from console.models import Run, Task, Tenant
from console.models.runs import live
from console.services.actor import Actor
from console.services.delivery import outbox
from console.services.engine import admission, handler_kinds, queueing, reserved, transitions
from console.services.errors import Conflict, InvalidInput, NotFound, QueueFull
from console.services.inputs import blank, is_id, key_refusal, params_too_large
from console.services.policies import versions as policies
from console.services.policies.tenant_overrides import keep_breaker_to_tenant
from console.services.settings import setting

log = logging.getLogger("rebound.engine")
WAITING = ("pending", "retry_wait")
MAX_KEY = 200
_RUNS = Run.__table__
_RUN_COLUMNS = tuple(column.key for column in _RUNS.c if column.key != "id")
_RUN_DEFAULTS = {column.key: column.default for column in _RUNS.c if column.default is not None}
_INSERT_RUN = Prepared(insert(_RUNS).returning(_RUNS.c.id), _RUN_COLUMNS)
# What a `submitted` timeline row is given; the rest of its columns are the run's or empty.
_SUBMITTED_EVENT = ("at", "kind", "to_status", "actor", "data")


def _insert_run_and_event() -> Prepared:
    """Return, for PostgreSQL, the run's INSERT and its `submitted` timeline row as one statement (one round trip)."""
    # A data-modifying CTE, as a transition's (transitions._guarded_move); the event's own values are bound as e_*.
    events = transitions.EVENTS
    new = insert(_RUNS).values({name: bindparam(name, type_=_RUNS.c[name].type) for name in _RUN_COLUMNS})
    new = new.returning(_RUNS.c.id, _RUNS.c.attempt, _RUNS.c.series).cte("new")
    values = {"run_id": new.c.id, "attempt": new.c.attempt, "series": new.c.series,
              "executions": literal_column("0")}
    values.update({name: bindparam(f"e_{name}", type_=events.c[name].type) for name in _SUBMITTED_EVENT})
    names = tuple(values)
    return Prepared(insert(events).from_select(names, select(*(values[name] for name in names)).select_from(new))
                    .returning(events.c.run_id))


_INSERT_RUN_AND_EVENT = _insert_run_and_event()


def task_for(value, tenant: Tenant) -> Task:
    """Return the live task a submission names by `task_id` in this tenant, or a 422 saying what is wrong."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"task_id is a task's id, a whole number, not {said_back(value)}", "task_id")
    task = db.session.get(Task, value) if is_id(value) else None  # past the id column's range: no task has it
    if task is None or task.tenant_id != tenant.id or task.deleted_at is not None:
        raise InvalidInput(f"no task {said_back(value)} in tenant {tenant.name}", "task_id")
    return task


def tenant_of_task(value) -> str | None:
    """Name the tenant of the live task a submission names by `task_id` (None if it names none): a task is one
    tenant's, so a submission naming it needs to name no tenant too."""
    task = db.session.get(Task, value) if is_id(value) else None
    return task.tenant.name if task is not None and task.deleted_at is None else None


def _policy_choice(policy, task: Task | None) -> tuple[int | None, dict]:
    """Return (policy id, overrides) from a request's `policy`: a name, an object of overrides, or nothing."""
    base_id = task.policy_id if task else None
    overrides = dict(task.policy_overrides or {}) if task else {}
    if isinstance(policy, str):
        base_id = policies.require(policy).id
    elif isinstance(policy, dict):
        # The rules for values saved anew, as a policy's save checks them (a stored override is read as it was).
        if problem := next(iter(too_long_codes(policy) + sla_out_of_order(policy)), None):
            raise InvalidInput(problem.message, f"policy.{problem.field}")
        overrides.update(policy)
    elif policy is not None:
        raise InvalidInput("policy is a policy name or an object of overrides", "policy")
    return base_id, overrides


def check_policy(policy) -> None:
    """Raise a 422 naming the field unless `policy` (a name, an object of overrides, or None) would be accepted."""
    effective_policy(*_policy_choice(policy, None))


def effective_policy(policy_id: int | None, overrides: dict) -> tuple[int, RetryPolicy]:
    """Return the version and the policy a run would use now, or a 422 naming the bad field."""
    try:
        return policies.effective(policy_id, overrides)
    except PolicyError as error:
        raise InvalidInput(error.message, f"policy.{error.field}") from None


def _waiting_counts(by_task: bool, by_policy_id: bool | None = None) -> Prepared:
    """Count the waiting runs of the task (or ad-hoc handler) and of the whole tenant, and read the tenant's quota;
    with by_policy_id given, read the policy in force (by id, or `default`) too."""
    runs, tenants = _RUNS, Tenant.__table__
    # The statuses as constants in the SQL: an IN over a Python list is re-expanded by SQLAlchemy on every call,
    # which cost a quarter of this query's time on each submit.
    # live(): the partial indexes' predicate as a term, so the counts read the small index of live runs.
    waiting = select(func.count()).select_from(runs).where(
        runs.c.tenant_id == bindparam("tenant_id"), runs.c.status.in_([literal(status) for status in WAITING]),
        live(runs.c.status))
    own = (waiting.where(runs.c.task_id == bindparam("task_id")) if by_task else
           waiting.where(runs.c.task_id.is_(None), runs.c.handler == bindparam("handler")))
    quota = select(tenants.c.max_queued).where(tenants.c.id == bindparam("tenant_id"))
    columns = [own.scalar_subquery(), waiting.scalar_subquery(), quota.scalar_subquery()]
    if by_policy_id is not None:
        in_force = policies.IN_FORCE_BY_ID if by_policy_id else policies.IN_FORCE_DEFAULT
        columns += [in_force.with_only_columns(in_force.selected_columns.id).scalar_subquery(),
                    in_force.with_only_columns(in_force.selected_columns.current_version).scalar_subquery()]
    return Prepared(select(*columns))


_WAITING = {by_task: _waiting_counts(by_task) for by_task in (True, False)}
# A submit reads the policy in force with the counts: the policy's own query was a tenth of a submit's CPU.
_WAITING_AND_POLICY = {(by_task, by_policy_id): _waiting_counts(by_task, by_policy_id)
                       for by_task in (True, False) for by_policy_id in (True, False)}


def _waiting(tenant_id: int, task: Task | None, handler: str) -> tuple[int, int, int]:
    """Return the runs waiting for this task (or ad-hoc handler), those of the whole tenant, and its max_queued."""
    own, tenant_total, max_queued = _WAITING[task is not None].execute(db.session.connection(), {
        "tenant_id": tenant_id, "task_id": task.id if task else None, "handler": handler}).one()
    return own, tenant_total, max_queued


def near_a_limit(*free: int, taking: int = 1) -> bool:
    """Tell whether a queue limit has too few places left (admission.EXACT_SLOTS beyond those being taken) to count
    without its lock."""
    return min(free) < admission.EXACT_SLOTS + taking


def hold_queue(tenant_id: int) -> None:
    """Hold the tenant's queue lock to the commit: its queue_limit and max_queued are counted one submit at a time."""
    locks.hold(f"queued:tenant:{tenant_id}")


def _waiting_and_policy(tenant_id: int, task: Task | None, handler: str, policy_id: int | None,
                        overrides: dict) -> tuple[int, int, int, int, RetryPolicy]:
    """Return the waiting counts and max_queued as _waiting does, then the policy version in force and the policy."""
    statement = _WAITING_AND_POLICY[task is not None, policy_id is not None]
    own, tenant_total, max_queued, in_force_id, version = statement.execute(db.session.connection(), {
        "tenant_id": tenant_id, "task_id": task.id if task else None, "handler": handler,
        "policy_id": policy_id}).one()
    if version is None:
        raise NotFound(f"retry policy {policy_id or policies.DEFAULT} is missing")
    try:
        return own, tenant_total, max_queued, version, policies.of_version(in_force_id, version, overrides)
    except PolicyError as error:
        raise InvalidInput(error.message, f"policy.{error.field}") from None


def _id_of(tenant: Tenant) -> int:
    """Return the tenant's id without reloading the row when the last commit expired the object."""
    # A caller submitting many runs holds one tenant across commits; reading `tenant.id` reloaded every column
    # each time (a fifth of a submit) although the id never changes and the quota is read with the counts.
    identity = inspect(tenant).identity
    return identity[0] if identity else tenant.id


def overflow_refusal(tenant: Tenant, handler: str, limit: str, current: int, maximum: int) -> QueueFull:
    """Return the 429 that says which limit is full and what to do."""
    them = agree(current, "it", "them")
    detail = (f"queue full: {plural(current, 'run')} already {agree(current, 'waits', 'wait')} for {handler} in "
              f"tenant {tenant.name} (queue_limit {maximum}); wait for {them} to drain or raise the policy's "
              "queue_limit"
              if limit == "queue_limit" else
              f"tenant {tenant.name} already has {plural(current, 'run')} waiting (max_queued {maximum}); "
              f"wait for {them} to drain or raise the tenant's quota")
    return QueueFull(detail, limit, current, maximum)


def overflow(tenant: Tenant, handler: str, limit: str, current: int, maximum: int, now: datetime,
             refused: int = 1) -> QueueFull:
    """Add the queue-overflow alert, counting `refused` submissions, to the caller's transaction; return the 429."""
    outbox.add("alert", f"queue_overflow:{tenant.id}:{handler}", {
        "rule": "queue_overflow", "tenant_id": tenant.id, "handler": handler, "limit": limit,
        "current": current, "max": maximum, "at": now.isoformat()}, now, tenant_id=tenant.id, occurrences=refused)
    return overflow_refusal(tenant, handler, limit, current, maximum)


def _reject(tenant: Tenant, handler: str, limit: str, current: int, maximum: int, now: datetime):
    refusal = overflow(tenant, handler, limit, current, maximum, now)
    db.session.commit()
    raise refusal


def submit(tenant: Tenant, actor: Actor, *, handler: str | None = None, task: Task | None = None,
           params: dict | None = None, idempotency_key: str | None = None, policy=None, source: str = "api",
           scheduled_for: datetime | None = None, workflow_id: int | None = None, workflow_step: int | None = None,
           clock: Clock = SYSTEM_CLOCK, attach: bool = True) -> tuple[Run, bool]:
    """Create a pending run and queue it; return (run, created). A known idempotency key returns its run.

    A workflow's step names its workflow and position: the engine then queues the workflow's advance when the
    run finishes (engine/followups.py), and knows nothing else about workflows. With attach=False a created run
    comes back outside the session, holding its column values only (for a caller that reads nothing else).
    """
    if (handler is None) == (task is None):
        raise InvalidInput("give exactly one of handler or task_id", "handler")
    if params is not None and not isinstance(params, dict):
        raise InvalidInput("params must be a JSON object", "params")
    if params and (too_large := params_too_large(params)):
        raise InvalidInput(too_large, "params")
    keep_breaker_to_tenant(policy, actor)
    check_key_shape(idempotency_key)
    check_key_given(idempotency_key, source)
    tenant_id = _id_of(tenant)
    if idempotency_key:
        existing = find_by_key(tenant_id, idempotency_key)
        if existing is not None:
            _same_work(existing, handler, task, idempotency_key)
            return existing, False
    handler = handler_kinds.normalise(task.handler if task else handler)
    policy_id, overrides = _policy_choice(policy, task)
    now = clock()
    own, tenant_total, max_queued, version, effective = _waiting_and_policy(tenant_id, task, handler, policy_id,
                                                                            overrides)
    if near_a_limit(effective.queue_limit - own, max_queued - tenant_total):
        # Counted again under the tenant's queue lock, held to the commit: submits at once cannot all take the last
        # place. Far from the limits (the usual case) the count above stands, off the hot path.
        hold_queue(tenant_id)
        own, tenant_total, max_queued = _waiting(tenant_id, task, handler)
    if own >= effective.queue_limit:
        _reject(tenant, handler, "queue_limit", own, effective.queue_limit, now)
    if tenant_total >= max_queued:
        # Read only when the quota is reached: during a reservation the quota is at least its queued runs.
        max_queued = reserved.queued_allowance(tenant_id, max_queued, now)
    if tenant_total >= max_queued:
        _reject(tenant, handler, "tenant.max_queued", tenant_total, max_queued, now)
    try:
        run = _insert_run(
            now, {"actor": actor.name, "data": {"source": source, "policy_version": version}},
            tenant_id=tenant_id, task_id=task.id if task else None, handler=handler,
            params={**(task.params if task else {}), **(params or {})}, policy_id=policy_id,
            policy_version=version, policy_overrides=overrides,
            idempotency_key=idempotency_key or uuid.uuid4().hex, status="pending", attempt=0, series=1,
            scheduled_for=scheduled_for or now, enqueued_at=now, created_at=now, updated_at=now,
            trace_id=uuid.uuid4().hex, source=source, workflow_id=workflow_id, workflow_step=workflow_step)
    except IntegrityError:
        # Another request with the same key won the race; answer with its run.
        db.session.rollback()
        return find_by_key(tenant_id, idempotency_key), False
    db.session.commit()
    if attach:
        _attach(run)
    enqueue(run, effective.timeout_s)
    return run, True


def _same_work(run: Run, handler: str | None, task: Task | None, key: str) -> None:
    """Refuse a known key sent for other work (another handler or task): answering with the key's run would tell
    the client its request was taken when it was not. Params may differ: a person may have fixed them since."""
    same_work(run.id, run.task_id, run.handler, task.id if task else None,
              handler_kinds.normalise(task.handler if task else handler), key)


def same_work(run_id: int, run_task_id: int | None, run_handler: str, task_id: int | None, handler: str,
              key: str) -> None:
    """Raise the 409 for a key whose run (run_id, of its task and handler) is other work than the one asked."""
    if run_task_id != task_id or run_handler != handler:
        what = f"task {run_task_id}" if run_task_id else f"handler {run_handler}"
        raise Conflict(f"idempotency_key {key!r} already names run {run_id}, of {what}: send other work with a new "
                       "key", "idempotency_key")


def _insert_run(now: datetime, submitted: dict, **values) -> Run:
    """Insert a new run and its `submitted` timeline row (`submitted`: the row's actor and data); return the run
    outside the session until its transaction commits."""
    # One prepared INSERT naming every column: the unit of work's flush of the same row cost about twice as
    # much (~0.7 against ~0.35 ms per submit).
    row = dict.fromkeys(_RUN_COLUMNS)
    row.update({key: default_value(default) for key, default in _RUN_DEFAULTS.items()})
    row.update(values)
    # Built before the INSERT: SQLite's write lock is held from the first write to the commit, and every other
    # writer (workers claiming and finishing runs) waits for it.
    run = new_row_object(Run, row)
    connection = db.session.connection()
    event = {"to_status": "pending", **submitted}
    if connection.dialect.name == "postgresql":
        # One round trip for both rows (SQLite has no INSERT in a CTE: two statements, one transaction).
        run.id = _INSERT_RUN_AND_EVENT.execute(connection, {
            **row, **{f"e_{name}": value for name, value in {"at": now, "kind": "submitted", **event}.items()}}
        ).scalar_one()
        return run
    run.id = _INSERT_RUN.execute(connection, row).scalar_one()
    transitions.event(run, "submitted", now, **event)
    return run


def new_row_object(model, row: dict):
    """Return a blank instance of the model holding these column values, as the ORM's loader builds one from a row."""
    # The constructor sets each of the run's 36 columns through the attribute instrumentation: 60 µs of a submit,
    # against 10 µs for the blank instance and its dict filled in (tests/contracts/test_sqlalchemy_internals.py).
    instance = model.__mapper__.class_manager.new_instance()
    instance.__dict__.update(row)
    return instance


def _attach(run: Run) -> None:
    """Make the committed run a persistent object with every value loaded."""
    # Added only now, so the commit did not expire them: they are exactly what was written, and reading them back
    # (to queue the run, to answer the request) was a query that cost a quarter of a submit.
    make_transient_to_detached(run)
    db.session.add(run)


def enqueue(run: Run, timeout_s: int) -> None:
    """Queue the run's next attempt; if Redis is down the run waits and the reconciler queues it later."""
    try:
        queueing.enqueue_now(run.id, run.series, run.attempt, timeout_s)
    except Exception as error:  # noqa: BLE001 - any transport failure is recoverable by the reconciler
        log.warning("run %s committed but not queued (%s); the reconciler will queue it", run.id, error)


def key_required(source: str) -> bool:
    """Tell whether a submission from this source must carry an idempotency key (the worker defaults file)."""
    return source == "api" and setting("WORKER_CONFIG").idempotency_required


def check_key_shape(idempotency_key, limit: int = MAX_KEY) -> None:
    """Refuse an idempotency key no row could hold: not a string of 1-limit characters, or one with a NUL."""
    if idempotency_key is not None and not (isinstance(idempotency_key, str) and 0 < len(idempotency_key) <= limit):
        raise InvalidInput(f"idempotency_key must be a string of 1-{limit} characters", "idempotency_key")
    if idempotency_key is not None and (refused := key_refusal(idempotency_key)):
        raise refused
    if idempotency_key is not None and blank(idempotency_key):  # every client's "  " would be one piece of work
        raise InvalidInput("idempotency_key is only spaces or invisible characters: send a key that names this piece "
                           "of work, or none",
                           "idempotency_key")


def check_key_given(idempotency_key, source: str) -> None:
    """Refuse an API submission without an idempotency key when the worker defaults file requires one."""
    if not idempotency_key and key_required(source):
        raise InvalidInput("idempotency_key is required here (idempotency.required in the worker defaults file): "
                           "send a key that names this piece of work, so a retried request cannot run it twice",
                           "idempotency_key")


def find_by_key(tenant_id: int, key: str) -> Run | None:
    """Return the tenant's run with this idempotency key, if any."""
    return db.session.execute(select(Run).where(Run.tenant_id == tenant_id, Run.idempotency_key == key)
                              ).scalar_one_or_none()
