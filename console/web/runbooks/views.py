"""Runbooks: the list, one runbook's form (Dry-run, Run), and an execution's page with its live log."""


from flask import Blueprint, flash, redirect, request, url_for
from flask_login import current_user

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import db
from console.services.errors import ServiceError
from console.services.people import tenants
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery import approvals, runbook_registry, runbooks
from console.services.recovery.runbook_params import InvalidParams
from console.web.render import page
from console.web.runbooks.forms import ExecutionRunForm, declared_fields, form_for, prefill, raw_params
from console.web.runbooks.present import value_text

bp = Blueprint("runbooks", __name__, url_prefix="/runbooks")


@bp.get("", strict_slashes=False)
@requires(VIEW)
def index():
    scope = tenant_scope()
    return page("runbooks/index.html", "list", listed=runbooks.listing(scope), scoped=scope is not None,
                recent=runbooks.executions(None, scope, limit=10), now=utcnow())


def _form(runbook, **kwargs):
    scope = tenant_scope()
    names = None if scope is not None or runbook.scope == "system" else [t.name for t in tenants.all_tenants()]
    return form_for(runbook, tenants=names, **kwargs)


def _runbook_page(runbook, form, *, error: str | None = None, status: int = 200):
    scope = tenant_scope()
    return page("runbooks/runbook.html", "form", runbook=runbook, form=form, fields=declared_fields(runbook, form),
                gated=runbooks.approval_needed(runbook), blocked=runbook.scope == "system" and scope is not None,
                executions=runbooks.executions(runbook.name, scope, limit=20), error=error, now=utcnow()), status


@bp.get("/<name>")
@requires(VIEW)
def show(name: str):
    runbook = runbooks.require(name)
    return _runbook_page(runbook, _form(runbook, data=prefill(runbook, request.args)))


@bp.post("/<name>")
@requires(OPERATE)
def start(name: str):
    runbook = runbooks.require(name)
    form = _form(runbook)
    dry_run = request.form.get("action") != "run"
    if not form.validate():
        # The fields the form could read may be wrong too: mark them now, not one round after another.
        problems = runbooks.param_problems(runbook.name, raw_params(runbook, form), scope=tenant_scope(),
                                           tenant=form.tenant.data if "tenant" in form else None)
        for field, message in problems.items():
            if field in form and not form[field].errors:
                form[field].errors = [message]
        return _runbook_page(runbook, form, error=_unsaved(form), status=422)
    try:
        execution = runbooks.start(runbook.name, raw_params(runbook, form), current_actor(), scope=tenant_scope(),
                                   tenant=form.tenant.data if "tenant" in form else None, dry_run=dry_run,
                                   reason=form.reason.data)
    except InvalidParams as invalid:
        db.session.rollback()
        for field, message in invalid.errors.items():
            if field in form:
                form[field].errors = [*form[field].errors, message]
        return _runbook_page(runbook, form, error=_unsaved(form), status=invalid.status)
    except ServiceError as refused:
        db.session.rollback()
        if refused.field in form:
            form[refused.field].errors = [refused.detail]
            return _runbook_page(runbook, form, error=_unsaved(form), status=refused.status)
        return _runbook_page(runbook, form, error=refused.detail, status=refused.status)
    return _go_to_started(execution)


def _go_to_started(execution):
    """Go to the execution just started, which says so there: a session's flash was read by whichever tab of the
    person's loaded a page next, so two tabs pressing Run each showed the other's message (helper 154)."""
    return redirect(url_for("runbooks.execution", execution_id=execution.id, started=1), 303)


def _unsaved(form) -> str:
    return "Nothing was started: fix the field marked below." if form.errors else "Nothing was started."


def _started(execution) -> str:
    if execution.status == "awaiting_approval":
        return (f"Asked for approval (request #{execution.approval_id}): a worker dry-runs it now so the approver "
                "sees what it would change, and it runs once another person approves; if the dry-run finds nothing "
                "to change, the request closes itself, as this page then says.")
    what = "a dry-run" if execution.dry_run else "for real"
    return (f"Started execution #{execution.id} of {execution.runbook} ({what}): a worker runs it, and this page "
            "follows it.")


def _execution_page(execution, *, status: int = 200, started: str | None = None):
    made, made_count = runbooks.changes(execution.id, planned=False)
    planned, planned_count = runbooks.changes(execution.id, planned=True)
    # Every second while a worker writes it; every 5 s while it waits for a person, to see their decision land.
    live = "1s" if execution.status in runbooks.LIVE or (
        execution.status == "awaiting_approval" and execution.previewed_at is None) else (
        "5s" if execution.status == "awaiting_approval" else None)
    runbook = runbook_registry.get(execution.runbook)
    return page("runbooks/execution.html", "detail", execution=execution, runbook=runbook,
                approval=runbooks.approval_of(execution), made=made, made_count=made_count, planned=planned,
                planned_count=planned_count, live=live, lines=[line for line in execution.log.splitlines() if line],
                run_form=ExecutionRunForm(), gated=runbook is not None and runbooks.approval_needed(runbook),
                tenant=execution.tenant.name if execution.tenant else None, shown=value_text, now=utcnow(),
                approval_status=lambda approval: approvals.status_at(approval, utcnow()), started=started,
                **_refused_for_real(execution)), status


def _refused_for_real(execution) -> dict:
    """What a finished dry-run's real run would be refused for, and the form to change its params in; asked only
    once it is done (the page polls every second while it runs)."""
    refused = runbooks.real_run_refusal(execution) if execution.dry_run and execution.status == "succeeded" else {}
    return {"refused_for_real": refused, "form_link": _form_link(execution) if refused else None}


def _form_link(execution) -> str:
    """The runbook's form filled in with an execution's params and tenant, to change them before a real run."""
    filled = {name: " ".join(map(str, value)) if isinstance(value, list) else ("true" if value is True else value)
              for name, value in (execution.params or {}).items() if value not in (None, False, "", [])}
    return url_for("runbooks.show", name=execution.runbook, tenant=execution.tenant.name if execution.tenant else None,
                   **filled)


@bp.get("/executions/<int:execution_id>")
@requires(VIEW)
def execution(execution_id: int):
    found = runbooks.get(execution_id, tenant_scope())
    # Said while it is under way: a reload after it ended still said "a worker runs it" (helper 164).
    started = (request.args.get("started") == "1" and found.requested_by_id == current_user.id
               and found.status in ("awaiting_approval", *runbooks.LIVE))
    return _execution_page(found, started=_started(found) if started else None)


@bp.post("/executions/<int:execution_id>/run")
@requires(OPERATE)
def run_for_real(execution_id: int):
    """Run for real, with the same params and tenant, what a dry-run showed."""
    scope = tenant_scope()
    dry = runbooks.get(execution_id, scope)
    form = ExecutionRunForm()
    try:
        if not form.validate():
            raise InvalidParams({"reason": "; ".join(form.reason.errors) or "the form expired; reload the page"})
        execution = runbooks.start(dry.runbook, dry.params, current_actor(), scope=scope,
                                   tenant=dry.tenant.name if dry.tenant else None, dry_run=False,
                                   reason=form.reason.data)
    except ServiceError as refused:
        db.session.rollback()
        flash(refused.detail, "error")
        return redirect(url_for("runbooks.execution", execution_id=execution_id), 303)
    return _go_to_started(execution)
