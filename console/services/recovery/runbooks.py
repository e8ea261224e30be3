"""Runbook executions as people ask for them: checked, filed (behind an approval when needed), queued, read back."""

import logging
from dataclasses import dataclass

from rq import Queue
from sqlalchemy import func, select

from console.db.upsert import insert_for
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.runbooks import ParamType, dump, needs_approval, references
from console.domain.secrets import mask_pair
from console.extensions import db
from console.models import (
    Approval,
    DeadLetter,
    Run,
    RunbookChange,
    RunbookExecution,
    RunbookPolicy,
    Task,
    Tenant,
)
from console.redis_conn import get_redis
from console.services import inputs
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine.queueing import MAINTENANCE_QUEUE, RUN_QUEUE
from console.services.errors import Forbidden, InvalidInput, NotFound, ServiceError
from console.services.people import tenants
from console.services.recovery import approvals, runbook_registry
from console.services.recovery.runbook_params import InvalidParams, checked
from console.services.recovery.runbook_registry import Runbook
from console.services.settings import setting

log = logging.getLogger("rebound.runbooks")
KIND = "runbook.execute"  # the approval kind (runbook_approval.py)
STATUSES = ("awaiting_approval", "queued", "running", "succeeded", "failed", "cancelled")
LIVE = ("queued", "running")
RUN_JOB, PREVIEW_JOB = "jobs.recovery.run_runbook", "jobs.recovery.preview_runbook"
PAGE_SIZE = 50
CHANGES_SHOWN = 500


@dataclass(frozen=True)
class Listed:
    """A runbook as the list shows it: its declaration, whether a real run needs approval, its latest executions."""

    runbook: Runbook
    needs_approval: bool
    admin_requires_approval: bool
    latest: list[RunbookExecution]


def run_job_id(execution_id: int) -> str:
    return f"runbook-{execution_id}"


def preview_job_id(execution_id: int) -> str:
    return f"runbook-preview-{execution_id}"


def require(name: str) -> Runbook:
    """Return the runbook of this name, or NotFound."""
    runbook = runbook_registry.get(name) if isinstance(name, str) else None
    if runbook is None:
        raise NotFound(f"no runbook named {name!r}; `rebound recovery-runbook --list` shows them")
    return runbook


def policies() -> dict[str, RunbookPolicy]:
    return {row.runbook: row for row in db.session.execute(select(RunbookPolicy)).scalars()}


def approval_needed(runbook: Runbook, policy: RunbookPolicy | None = None) -> bool:
    """Tell whether a real run of this runbook waits for a second person (high risk, or an admin's rule)."""
    policy = policy if policy is not None else db.session.get(RunbookPolicy, runbook.name)
    return needs_approval(runbook.risk, bool(policy and policy.requires_approval))


def listing(tenant_id: int | None, latest: int = 3) -> list[Listed]:
    """Return every runbook with whether it needs approval and its latest executions this scope may see."""
    rules = policies()
    shown = []
    for runbook in runbook_registry.every():
        rule = rules.get(runbook.name)
        shown.append(Listed(runbook, approval_needed(runbook, rule), bool(rule and rule.requires_approval),
                            executions(runbook.name, tenant_id, limit=latest) if latest else []))
    return shown


def _tenant(runbook: Runbook, scope: int | None, name) -> Tenant | None:
    """Return the tenant an execution acts on (None: every tenant, or the whole system), within the caller's wall."""
    if name is not None and not isinstance(name, str):
        raise InvalidInput("tenant is a tenant name", "tenant")
    if name and not name.strip():
        # Read as "every tenant", a stray space widened an execution to all of them (helper 165).
        raise InvalidInput("tenant is a tenant name; leave it out to act on every tenant you may see", "tenant")
    name = (name or "").strip() or None
    if runbook.scope == "system":
        if scope is not None:
            raise Forbidden(f"runbook {runbook.name} acts on the whole system; only people not limited to a tenant "
                            "may run it")
        if name is not None:
            raise InvalidInput(f"runbook {runbook.name} acts on the whole system; leave the tenant out", "tenant")
        return None
    if scope is not None:
        own = db.session.get(Tenant, scope)
        if name not in (None, own.name):
            raise Forbidden(f"you may run runbooks only on tenant {own.name}'s objects", "tenant")
        return own
    return tenants.require(name) if name else None


_OWNED = {ParamType.RUN: Run, ParamType.DEAD_LETTER: DeadLetter, ParamType.TASK: Task}


def _owner(runbook: Runbook, values: dict) -> Tenant | None:
    """The one tenant whose runs, dead letters or tasks the params name (None: none named, or several tenants'), so
    an execution started without a tenant is on record, and in Approvals, as acting on that tenant's objects."""
    owners: set[int] = set()
    for kind, ids in references(runbook.params, values):
        model = _OWNED[kind]
        owners |= set(db.session.execute(select(model.tenant_id).where(model.id.in_(ids))).scalars())
    return db.session.get(Tenant, owners.pop()) if len(owners) == 1 else None


def _reason(reason, required: bool) -> str | None:
    return approvals.reason_of(reason) if required else inputs.note(reason, "reason")


def param_problems(name: str, raw_params, *, scope: int | None, tenant=None) -> dict[str, str]:
    """Return what start would refuse in each parameter (empty: nothing), for a form that marks every wrong field
    at once; a tenant that cannot be used is start's to say."""
    runbook = require(name)
    try:
        target = _tenant(runbook, scope, tenant)
        checked(runbook, raw_params, target.id if target else None)
    except InvalidParams as invalid:
        return dict(invalid.errors)
    except ServiceError:
        return {}
    return {}


def real_run_refusal(execution: RunbookExecution, clock: Clock = SYSTEM_CLOCK) -> dict[str, str]:
    """Say what a real run of a dry-run's params would be refused for by its runbook's own rule (a replay with no
    filter needs `every`), so its page offers the form to change them instead of a button that can only fail."""
    runbook = runbook_registry.get(execution.runbook)
    if runbook is None or runbook.real_check is None:
        return {}
    try:
        values = checked(runbook, execution.params, execution.tenant_id)
    except InvalidParams as invalid:
        return dict(invalid.errors)
    return runbook.real_check(values, clock())


def start(name: str, raw_params, actor: Actor, *, scope: int | None, tenant=None, dry_run: bool = False,
          reason=None, clock: Clock = SYSTEM_CLOCK, enqueue: bool = True) -> RunbookExecution:
    """File an execution: queued for a worker, or (a real run that needs it) awaiting a second person's approval.

    `scope` is the caller's tenant wall (None: unscoped); `tenant` the tenant name asked for. Nothing is written
    unless every check passes. With enqueue=False the caller runs it (the CLI, in its own process).
    """
    runbook = require(name)
    if not isinstance(dry_run, bool):
        raise InvalidInput("dry_run is true or false", "dry_run")
    target = _tenant(runbook, scope, tenant)
    now = clock()
    values = checked(runbook, raw_params, target.id if target else None)
    if target is None and runbook.scope != "system":  # "every tenant" said of one tenant's dead letter
        target = _owner(runbook, values)
    errors = runbook.check(values, now) if runbook.check is not None else {}
    if not dry_run and runbook.real_check is not None:
        errors = {**runbook.real_check(values, now), **errors}
    if errors:
        raise InvalidParams(errors)
    gated = not dry_run and approval_needed(runbook)
    reason = _reason(reason, required=gated)
    if gated and actor.id is None:
        raise Forbidden(f"a real run of {runbook.name} needs a second person's approval, so it must be requested by a "
                        "person (or a person's token); from the CLI, add --as USERNAME")
    execution = RunbookExecution(
        runbook=runbook.name, tenant_id=target.id if target else None, params=dump(runbook.params, values),
        dry_run=dry_run, reason=reason, status="awaiting_approval" if gated else "queued", log="", changes_total=0,
        requested_by=actor.name, requested_by_id=actor.id, created_at=now, queued_at=None if gated else now)
    db.session.add(execution)
    db.session.flush()
    if gated:
        approval = approvals.request(
            KIND, actor, reason=reason, subject_type="runbook_execution", subject_id=execution.id,
            payload={"execution_id": execution.id, "runbook": runbook.name, "params": execution.params},
            before={}, after={}, tenant=target, clock=clock)
        execution.approval_id = approval.id
    if not dry_run:
        audit.record(db.session, actor, "runbook.request", "runbook_execution", execution.id,
                     after={"runbook": runbook.name, "params": execution.params, "status": execution.status,
                            "approval_id": execution.approval_id},
                     tenant=target.name if target else None, note=reason, clock=lambda: now)
    db.session.commit()
    if enqueue:
        (enqueue_preview if gated else enqueue_run)(execution.id)
    return execution


def _enqueue(function: str, execution_id: int, job_id: str, *, first: bool = False) -> None:
    # `first`: at the front of the runs' queue, so a free worker takes it before any waiting run (the queues take
    # turns: at most one job of each other queue goes first); on the maintenance queue, when workers read it last, an
    # approver waited behind an incident's backlog.
    queue = Queue(RUN_QUEUE if first else MAINTENANCE_QUEUE, connection=get_redis())
    try:
        queue.enqueue(function, execution_id, job_id=job_id, job_timeout=int(setting("RUNBOOK_TIMEOUT_S")),
                      result_ttl=60, failure_ttl=24 * 3600, at_front=first)
    except Exception as error:  # noqa: BLE001 - any transport failure is recoverable by the reconciler
        log.warning("runbook execution %s committed but not queued (%s); the reconciler will queue it",
                    execution_id, error)


def enqueue_run(execution_id: int) -> None:
    """Queue an execution for a worker (ahead of the waiting runs when its runbook acts on them); if Redis is down
    the reconciler queues it later."""
    execution = db.session.get(RunbookExecution, execution_id)
    runbook = runbook_registry.get(execution.runbook) if execution is not None else None
    _enqueue(RUN_JOB, execution_id, run_job_id(execution_id), first=bool(runbook and runbook.ahead))


def enqueue_preview(execution_id: int) -> None:
    """Queue the dry-run an approver reads before deciding, ahead of the waiting runs: a person waits on it."""
    _enqueue(PREVIEW_JOB, execution_id, preview_job_id(execution_id), first=True)


def get(execution_id, tenant_id: int | None = None) -> RunbookExecution:
    """Return an execution this scope may see (a tenant's own; not one across every tenant), or NotFound."""
    execution = db.session.get(RunbookExecution, execution_id) if isinstance(execution_id, int) else None
    if execution is None or (tenant_id is not None and execution.tenant_id != tenant_id):
        raise NotFound(f"no runbook execution with id {execution_id}")
    return execution


def executions(runbook: str | None, tenant_id: int | None, *, before: int | None = None,
               limit: int = PAGE_SIZE) -> list[RunbookExecution]:
    """Return executions newest first (of one runbook, or all), one keyset page at a time."""
    query = select(RunbookExecution).order_by(RunbookExecution.id.desc()).limit(limit)
    if runbook is not None:
        query = query.where(RunbookExecution.runbook == runbook)
    if tenant_id is not None:
        query = query.where(RunbookExecution.tenant_id == tenant_id)
    if before is not None:
        query = query.where(RunbookExecution.id < before)
    return list(db.session.execute(query).scalars())


def changes(execution_id: int, *, planned: bool, limit: int = CHANGES_SHOWN) -> tuple[list[RunbookChange], int]:
    """Return the first changes of an execution (planned: found by a dry-run or preview) and how many rows there are."""
    where = (RunbookChange.execution_id == execution_id, RunbookChange.planned.is_(planned))
    rows = db.session.execute(select(RunbookChange).where(*where).order_by(RunbookChange.id).limit(limit)).scalars()
    count = db.session.execute(select(func.count()).select_from(RunbookChange).where(*where)).scalar_one()
    return list(rows), count


def as_change(row: RunbookChange) -> dict:
    """A change as people read it, on the API as on the page: a secret's value masked, under its name or inside."""
    before, after = mask_pair(row.before, row.after, row.field)
    return {"object": row.object, "id": row.object_id, "field": row.field, "before": before, "after": after}


def approval_of(execution: RunbookExecution) -> Approval | None:
    return db.session.get(Approval, execution.approval_id) if execution.approval_id else None


def set_requires_approval(name: str, required: bool, actor: Actor, *, scope: int | None,
                          clock: Clock = SYSTEM_CLOCK) -> RunbookPolicy | None:
    """An admin's rule: real runs of this runbook wait for approval whatever its risk (audited when it changes);
    return the rule stored (None: none ever was, and it stays off)."""
    runbook = require(name)
    if scope is not None:
        raise Forbidden("runbooks are shared by every tenant; only an admin not limited to a tenant changes their "
                        "rules")
    if not isinstance(required, bool):
        raise InvalidInput("requires_approval is true or false", "requires_approval")
    now = clock()
    # Locked (when it exists) for the audit's "before"; the write is one upsert, so two admins saving the same
    # runbook's first rule at once cannot both insert it.
    found = db.session.execute(select(RunbookPolicy.requires_approval).where(RunbookPolicy.runbook == runbook.name)
                               .with_for_update()).scalar_one_or_none()
    before = bool(found)
    if before == required:  # saved as it was: 8 audit rows said false → false (helper 107)
        db.session.commit()
        return db.session.get(RunbookPolicy, runbook.name)
    connection = db.session.connection()
    statement = insert_for(connection)(RunbookPolicy.__table__).values(
        runbook=runbook.name, requires_approval=required, updated_at=now, updated_by=actor.name)
    connection.execute(statement.on_conflict_do_update(
        index_elements=[RunbookPolicy.__table__.c.runbook],
        set_={"requires_approval": required, "updated_at": now, "updated_by": actor.name}))
    audit.record(db.session, actor, "runbook.policy", "runbook", runbook.name,
                 before={"requires_approval": before}, after={"requires_approval": required}, clock=lambda: now)
    db.session.commit()
    return db.session.get(RunbookPolicy, runbook.name, populate_existing=True)
