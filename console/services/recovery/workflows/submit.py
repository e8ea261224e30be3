"""Submit a workflow: check every step, write it whole (a known key answers with the same workflow), start step 1."""

import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.saga import MAX_NAME_CHARS, MAX_STEPS, WorkflowStatus
from console.extensions import db
from console.models import Tenant, Workflow, WorkflowStep
from console.services import inputs
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import handler_kinds
from console.services.engine import submit as engine_submit
from console.services.errors import Conflict, Forbidden, InvalidInput
from console.services.policies.tenant_overrides import keep_breaker_to_tenant
from console.services.recovery.workflows import advance

log = logging.getLogger("rebound.workflows")
STEP_FIELDS = ("handler", "params", "policy")
MAX_KEY = engine_submit.MAX_KEY


@dataclass(frozen=True)
class StepInput:
    handler: str  # canonical kind:name
    params: dict
    policy: object  # a policy name, an object of overrides, or None


def check_name(name) -> str:
    """Return the workflow's name, or a 422 naming the field."""
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > MAX_NAME_CHARS:
        raise InvalidInput(f"name is text of 1-{MAX_NAME_CHARS} characters, e.g. \"ship order 7\"", "name")
    if inputs.blank(name):  # "\u200b\u200b" passed strip() and listed as a workflow with no name (helper 105)
        raise InvalidInput("name shows nothing: it is only spaces or invisible characters; give the workflow a name a "
                           "person can read, e.g. \"ship order 7\"", "name")
    return name.strip()


def check_key(key) -> str:
    """Return the idempotency key, or a 422 naming the field."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY:
        raise InvalidInput(f"idempotency_key is a string of 1-{MAX_KEY} characters; a second submit with the same "
                           "key answers with the same workflow", "idempotency_key")
    if inputs.blank(key):  # every client's "   " would be one workflow
        raise InvalidInput("idempotency_key is only spaces or invisible characters: send a key that names this "
                           "workflow", "idempotency_key")
    if refused := inputs.key_refusal(key):
        raise refused
    return key


def check_steps(steps) -> list[StepInput]:
    """Return the steps checked and normalised, or a 422 whose field names the step (0-based, as in the JSON)."""
    if not isinstance(steps, list) or not steps:
        raise InvalidInput('steps is a non-empty list of {"handler": ..., "params": {...}, "policy": ...}', "steps")
    if len(steps) > MAX_STEPS:
        raise InvalidInput(f"a workflow has at most {MAX_STEPS} steps; this one has {len(steps)}", "steps")
    return [_check_step(step, index) for index, step in enumerate(steps)]


def _check_step(step, index: int) -> StepInput:
    where, label = f"steps[{index}]", f"step {index + 1}"
    if not isinstance(step, dict):
        raise InvalidInput(f'{label} is an object such as {{"handler": "python:demo.noop", "params": {{}}}}', where)
    unknown = sorted(set(step) - set(STEP_FIELDS))
    if unknown:
        raise InvalidInput(f"{label}: unknown field {unknown[0]!r}; allowed: {', '.join(STEP_FIELDS)}",
                           f"{where}.{unknown[0]}")
    if step.get("handler") is None:
        raise InvalidInput(f"{label} needs a handler, e.g. python:demo.noop", f"{where}.handler")
    try:
        handler = handler_kinds.normalise(step["handler"])
    except InvalidInput as error:
        raise InvalidInput(f"{label}: {error.detail}", f"{where}.handler") from None
    params = step.get("params")
    if params is not None and not isinstance(params, dict):
        raise InvalidInput(f"{label}: params must be a JSON object", f"{where}.params")
    # Checked now, as a run's submit checks them: found only when the step starts, they failed the workflow.
    if params and (too_large := inputs.params_too_large(params)):
        raise InvalidInput(f"{label}: {too_large}", f"{where}.params")
    try:
        engine_submit.check_policy(step.get("policy"))
    except InvalidInput as error:
        raise InvalidInput(f"{label}: {error.detail}", f"{where}.{error.field or 'policy'}") from None
    return StepInput(handler, params or {}, step.get("policy"))


def find_by_key(tenant_id: int, key: str) -> Workflow | None:
    """Return the tenant's workflow submitted with this idempotency key, if any."""
    return db.session.execute(select(Workflow).where(Workflow.tenant_id == tenant_id,
                                                     Workflow.idempotency_key == key)).scalar_one_or_none()


def submit(tenant: Tenant, actor: Actor, *, name, steps, idempotency_key, clock: Clock = SYSTEM_CLOCK
           ) -> tuple[Workflow, bool]:
    """Write a workflow and its steps (audited), then start step 1; return (workflow, created).

    A known idempotency key sent with the same name and steps returns its workflow (a client's retry); sent with
    other ones it is a 409 naming the workflow, as a run's key sent for other work is.
    """
    name, key, checked = check_name(name), check_key(idempotency_key), check_steps(steps)
    for index, step in enumerate(checked):
        try:
            keep_breaker_to_tenant(step.policy, actor)
        except Forbidden as refused:
            raise Forbidden(f"steps[{index}]: {refused.detail}", f"steps[{index}].policy.breaker") from None
    existing = find_by_key(tenant.id, key)
    if existing is not None:
        return _same_work(existing, name, checked), False
    now = clock()
    workflow = Workflow(tenant_id=tenant.id, name=name, idempotency_key=key, status=WorkflowStatus.RUNNING.value,
                        step_count=len(checked), current_step=0, created_by=actor.name[:80], created_at=now,
                        updated_at=now)
    db.session.add(workflow)
    try:
        db.session.flush()  # the unique key decides a race between two submits of the same key
    except IntegrityError:
        db.session.rollback()
        return _same_work(find_by_key(tenant.id, key), name, checked), False
    db.session.add_all([WorkflowStep(workflow_id=workflow.id, position=position, handler=step.handler,
                                     params=step.params, policy=step.policy)
                        for position, step in enumerate(checked, start=1)])
    audit.record(db.session, actor, "workflow.submit", "workflow", workflow.id, after={
        "name": name, "steps": [step.handler for step in checked], "idempotency_key": key},
        tenant=tenant.name, clock=lambda: now)
    db.session.commit()
    workflow_id = workflow.id
    try:
        advance.advance(workflow_id, clock=clock)
    except Exception:  # noqa: BLE001 - the workflow is written; the reconcile pass starts it if this could not
        db.session.rollback()
        log.exception("workflow %s submitted but not started; the reconcile pass will start it", workflow_id)
    return db.session.get(Workflow, workflow_id), True


def _same_work(existing: Workflow, name: str, checked: list[StepInput]) -> Workflow:
    """Return the workflow a known key names if it was submitted as this one is, else refuse with a 409."""
    stored = db.session.execute(select(WorkflowStep).where(WorkflowStep.workflow_id == existing.id)
                                .order_by(WorkflowStep.position)).scalars().all()
    if existing.name == name and [StepInput(s.handler, s.params or {}, s.policy) for s in stored] == checked:
        return existing
    raise Conflict(f"idempotency key {existing.idempotency_key!r} is workflow #{existing.id} ({existing.name}), "
                   "submitted with another name or other steps; use a new key for other work", "idempotency_key")
