"""Submit many runs in one call: each item checked on its own, one transaction, one Redis round trip."""

import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from console.db.upsert import insert_for
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.policy import RetryPolicy
from console.extensions import db
from console.models import Run, Task, Tenant
from console.services.actor import Actor
from console.services.engine import handler_kinds, queueing, reserved, transitions
from console.services.engine import submit as submitting
from console.services.engine.submit import _id_of, _policy_choice, _waiting, effective_policy, task_for
from console.services.errors import InvalidInput, QueueFull, ServiceError
from console.services.inputs import is_id, json_problem, params_too_large
from console.services.policies.tenant_overrides import keep_breaker_to_tenant

log = logging.getLogger("rebound.engine")
MAX_ITEMS = 1000
FIELDS = ("handler", "task_id", "tenant", "params", "idempotency_key", "policy")
_RUNS = Run.__table__
_RUN_COLUMNS = tuple(column.key for column in _RUNS.c if column.key != "id")
_RUN_DEFAULTS = {column.key: column.default for column in _RUNS.c if column.default is not None}


class BatchTooLarge(ServiceError):
    status = 413
    code = "too_many_runs"


@dataclass
class _Item:
    """One valid item, before the limits and the database have had their say."""

    index: int
    tenant: Tenant
    tenant_id: int
    task: Task | None
    handler: str
    params: dict
    key: str
    policy_id: int | None
    overrides: dict
    version: int
    policy: RetryPolicy


def check_size(items) -> list:
    """Return the batch's items, or raise a 400 (not a list) or a 413 naming the limit."""
    if not isinstance(items, list):
        raise InvalidInput('send {"runs": [<the same objects as POST /worker/tasks>, ...]}', "runs")
    if len(items) > MAX_ITEMS:
        raise BatchTooLarge(f"a batch holds at most {MAX_ITEMS:,} runs, this one has {len(items):,}; split it", "runs")
    return items


def submit_batch(items: list, actor: Actor, tenant_for: Callable[[object, object], Tenant], *, source: str = "api",
                 clock: Clock = SYSTEM_CLOCK) -> list[dict]:
    """Create a pending run for each valid item and queue them; return one answer per item, in order.

    An answer is {index, id, status, created} or {index, error, detail, field}. Idempotency keys dedupe within
    the batch and against the database; the valid items are written in one transaction and queued in one round
    trip, the invalid ones write nothing.
    """
    now = clock()
    answers: list[dict | None] = [None] * len(check_size(items))
    cache: dict = {}
    valid = []
    source_needs_key = submitting.key_required(source)
    for index, item in enumerate(items):
        try:
            valid.append(_check(index, item, tenant_for, cache, source_needs_key, actor))
        except ServiceError as error:
            answers[index] = _refusal(index, error)
    # Later items with a key already seen in this batch answer with the first one's outcome.
    first: dict[tuple[int, str], _Item] = {}
    for item in valid:
        first.setdefault((item.tenant_id, item.key), item)
    outcome: dict[tuple[int, str], dict] = {}
    # Which work each key's run does, (task id, handler): a later item asking other work under the key is a 409.
    work: dict[tuple[int, str], tuple[int | None, str]] = {}
    for slot, (run_id, status, task_id, handler) in _known(list(first)).items():
        outcome[slot] = {"id": run_id, "status": status, "created": False}
        work[slot] = (task_id, handler)
    fresh = [item for slot, item in first.items() if slot not in outcome]
    accepted = _within_limits(fresh, outcome, now)
    if accepted:
        _insert(accepted, actor, source, now, outcome, work)
    db.session.commit()
    _enqueue([(outcome[(item.tenant_id, item.key)]["id"], item.policy.timeout_s) for item in accepted
              if outcome[(item.tenant_id, item.key)].get("created")])
    for item in valid:
        slot = (item.tenant_id, item.key)
        owner = work.get(slot) or _work_of(first[slot])  # a run this batch made does its first item's work
        answers[item.index] = {"index": item.index, **_answer(item, outcome[slot], owner, first[slot] is item)}
    return answers


def _answer(item: _Item, outcome: dict, owner: tuple[int | None, str], first: bool) -> dict:
    """Return one item's answer: its key's outcome, or the 409 if the key's run does other work than the item's."""
    if "id" not in outcome:
        return outcome
    try:
        submitting.same_work(outcome["id"], *owner, *_work_of(item), item.key)
    except ServiceError as error:
        return _refusal(item.index, error)
    return outcome if first else {**outcome, "created": False}


def _work_of(item: _Item) -> tuple[int | None, str]:
    """Return the work an item asks for: (task id, handler)."""
    return item.task.id if item.task else None, item.handler


def _refusal(index: int, error: ServiceError) -> dict:
    return {"index": index, "error": error.code, "detail": error.detail, "field": error.field}


def _check(index: int, item, tenant_for, cache: dict, needs_key: bool = False, actor: Actor | None = None) -> _Item:
    """Check one item as POST /worker/tasks checks its body; raise the 4xx that names what to fix."""
    if not isinstance(item, dict):
        raise InvalidInput("each run is an object, as POST /worker/tasks takes")
    for name, value in item.items():
        if name not in FIELDS:
            raise InvalidInput(f"unknown field {name!r}; allowed: {', '.join(sorted(FIELDS))}", name)
        # What the single path's JSON reader refuses for a whole body is this item's own problem here.
        if problem := json_problem(value, f"runs[{index}].{name[:40]}"):
            raise InvalidInput(problem, name)
    name = item.get("tenant")
    if name is not None and not isinstance(name, str):
        raise InvalidInput("tenant is a tenant name", "tenant")
    task_id = item.get("task_id")
    # Without a tenant named, a task id may name its tenant (tenant_for decides): one lookup per task then.
    tenant = _once(cache, ("tenant", name, task_id if name is None and is_id(task_id) else None), tenant_for, name,
                   task_id)
    tenant_id = _id_of(tenant)
    task = None
    if task_id is not None:
        task = task_for(task_id, tenant)
    if (item.get("handler") is None) == (task is None):
        raise InvalidInput("give exactly one of handler or task_id", "handler")
    params = item.get("params")
    if params is not None and not isinstance(params, dict):
        raise InvalidInput("params must be a JSON object", "params")
    if params and (too_large := params_too_large(params)):
        raise InvalidInput(too_large, "params")
    key = item.get("idempotency_key")
    submitting.check_key_shape(key)
    if needs_key:
        submitting.check_key_given(key, "api")
    handler = task.handler if task else item["handler"]
    if not isinstance(handler, str):
        raise InvalidInput("handler must be a string such as python:demo.noop", "handler")
    handler = _once(cache, ("handler", handler), handler_kinds.normalise, handler)
    # A named policy and the policy in force are a query each: a batch asks once per task and policy given.
    policy = item.get("policy")
    if actor is not None:
        keep_breaker_to_tenant(policy, actor)
    policy_id, overrides = _once(cache, ("choice", task and task.id, json.dumps(policy, sort_keys=True)),
                                 _policy_choice, policy, task)
    version, policy = _once(cache, ("policy", policy_id, json.dumps(overrides, sort_keys=True)),
                            effective_policy, policy_id, overrides)
    return _Item(index, tenant, tenant_id, task, handler, {**(task.params if task else {}), **(params or {})},
                 key or uuid.uuid4().hex, policy_id, overrides, version, policy)


def _once(cache: dict, key: tuple, work, *args):
    """Return work(*args), or raise its 4xx, computing each at most once per batch."""
    if key not in cache:
        try:
            cache[key] = work(*args)
        except ServiceError as error:
            cache[key] = error
    if isinstance(cache[key], ServiceError):
        raise cache[key]
    return cache[key]


def _known(slots: list[tuple[int, str]]) -> dict[tuple[int, str], tuple[int, str, int | None, str]]:
    """Return {(tenant id, key): (run id, status, task id, handler)} of the runs these keys already name."""
    found = {}
    by_tenant: dict[int, list[str]] = {}
    for tenant_id, key in slots:
        by_tenant.setdefault(tenant_id, []).append(key)
    for tenant_id, keys in by_tenant.items():
        rows = db.session.execute(select(_RUNS.c.idempotency_key, _RUNS.c.id, _RUNS.c.status, _RUNS.c.task_id,
                                         _RUNS.c.handler).where(
            _RUNS.c.tenant_id == tenant_id, _RUNS.c.idempotency_key.in_(keys)))
        found.update({(tenant_id, key): rest for key, *rest in rows})
    return found


def _within_limits(items: list[_Item], outcome: dict, now: datetime) -> list[_Item]:
    """Return the items the queue limit and the tenant's quota leave room for; answer the rest with a 429."""
    # Counted once per batch, then carried forward item by item, as one submit after another would see them.
    own, waiting = _counted(items, now)
    taking = Counter(_group(item) for item in items) + Counter(item.tenant_id for item in items)
    near = sorted({item.tenant_id for item in items if _near(item, own, waiting, taking)})
    if near:
        for tenant_id in near:  # in tenant order, so two batches sharing tenants wait rather than deadlock
            submitting.hold_queue(tenant_id)
        own, waiting = _counted(items, now)
    accepted, refused = [], {}
    for item in items:
        group = _group(item)
        tenant_total, max_queued = waiting[item.tenant_id]
        if own[group] >= item.policy.queue_limit:
            refusal = _full(item, "queue_limit", own[group], item.policy.queue_limit, refused)
        elif tenant_total >= max_queued:
            refusal = _full(item, "tenant.max_queued", tenant_total, max_queued, refused)
        else:
            own[group] += 1
            waiting[item.tenant_id][0] += 1
            accepted.append(item)
            continue
        outcome[(item.tenant_id, item.key)] = {key: value for key, value in refusal.to_dict().items()
                                               if key in ("error", "detail", "field")}
    # One overflow alert per tenant, handler and limit, counting every item it refused (the alert rule's figure).
    for (_, _, limit), (item, current, maximum, count) in refused.items():
        submitting.overflow(item.tenant, item.handler, limit, current, maximum, now, refused=count)
    return accepted


def _group(item: _Item) -> tuple:
    return item.tenant_id, item.task.id if item.task else None, item.handler


def _counted(items: list[_Item], now: datetime) -> tuple[dict[tuple, int], dict[int, list[int]]]:
    """Return the runs waiting per group (tenant, task, handler) and per tenant [waiting, max_queued]."""
    own: dict[tuple, int] = {}
    waiting: dict[int, list[int]] = {}
    for item in items:
        group = _group(item)
        if group not in own:
            own[group], total, max_queued = _waiting(item.tenant_id, item.task, item.handler)
            if item.tenant_id not in waiting:
                max_queued = reserved.queued_allowance(item.tenant_id, max_queued, now)
            waiting.setdefault(item.tenant_id, [total, max_queued])
    return own, waiting


def _near(item: _Item, own: dict, waiting: dict, taking: Counter) -> bool:
    """Tell whether the batch's items of this one's group or tenant (`taking` counts both) come near a limit."""
    group, (total, max_queued) = _group(item), waiting[item.tenant_id]
    return (submitting.near_a_limit(item.policy.queue_limit - own[group], taking=taking[group])
            or submitting.near_a_limit(max_queued - total, taking=taking[item.tenant_id]))


def _full(item: _Item, limit: str, current: int, maximum: int, refused: dict) -> QueueFull:
    """Return the 429 for one item over a limit, counted in `refused` for the batch's overflow alerts."""
    first = refused.setdefault((item.tenant_id, item.handler, limit), [item, current, maximum, 0])
    first[3] += 1
    return submitting.overflow_refusal(item.tenant, item.handler, limit, current, maximum)


def _insert(items: list[_Item], actor: Actor, source: str, now: datetime, outcome: dict, work: dict) -> None:
    """Insert the runs and their timeline rows; a key another writer took meanwhile answers with its run (its work
    noted in `work`)."""
    defaults = {key: default for key, default in _RUN_DEFAULTS.items()}
    rows = []
    # In key order, so two batches sharing keys on PostgreSQL wait for each other instead of deadlocking.
    for item in sorted(items, key=lambda item: (item.tenant_id, item.key)):
        row = dict.fromkeys(_RUN_COLUMNS)
        row.update({key: default.arg if default.is_scalar else default.arg(None) for key, default in defaults.items()})
        row.update(
            tenant_id=item.tenant_id, task_id=item.task.id if item.task else None, handler=item.handler,
            params=item.params, policy_id=item.policy_id, policy_version=item.version,
            policy_overrides=item.overrides, idempotency_key=item.key, status="pending", attempt=0, series=1,
            scheduled_for=now, enqueued_at=now, created_at=now, updated_at=now, trace_id=uuid.uuid4().hex,
            source=source)
        rows.append(row)
    connection = db.session.connection()
    # ON CONFLICT on the (tenant, key) unique constraint: a concurrent writer's run wins without an error, and
    # under READ COMMITTED this statement waits for that writer instead of reading before it committed.
    statement = insert_for(connection)(_RUNS).on_conflict_do_nothing(
        index_elements=[_RUNS.c.tenant_id, _RUNS.c.idempotency_key]).returning(
        _RUNS.c.id, _RUNS.c.tenant_id, _RUNS.c.idempotency_key)
    inserted = {(tenant_id, key): run_id for run_id, tenant_id, key in connection.execute(statement, rows)}
    by_slot = {(item.tenant_id, item.key): item for item in items}
    events = []
    for slot, run_id in inserted.items():
        outcome[slot] = {"id": run_id, "status": "pending", "created": True}
        events.append(transitions.event_row(
            run_id=run_id, at=now, kind="submitted", to_status="pending", attempt=0, series=1, actor=actor.name,
            data={"source": source, "policy_version": by_slot[slot].version}))
    if events:
        connection.execute(transitions.INSERT_EVENT, events)
    lost = [slot for slot in by_slot if slot not in inserted]
    known = _known(lost) if lost else {}
    for slot in lost:
        if slot in known:
            run_id, status, task_id, handler = known[slot]
            work[slot] = (task_id, handler)
            outcome[slot] = {"id": run_id, "status": status, "created": False}
        else:  # the other writer rolled back after this INSERT passed over its key: rare, and safe to resend
            outcome[slot] = {"error": "conflict", "detail": "another request was submitting this idempotency key; "
                             "send the item again", "field": "idempotency_key"}


def _enqueue(runs: list[tuple[int, int]]) -> None:
    """Queue the new runs' first attempts in one round trip; if Redis is down the reconciler queues them later."""
    try:
        queueing.enqueue_first_attempts(runs)
    except Exception as error:  # noqa: BLE001 - any transport failure is recoverable by the reconciler
        log.warning("%d submitted runs committed but not queued (%s); the reconciler will queue them", len(runs), error)
