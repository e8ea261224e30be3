"""Runs → Workflows: the list, a form to submit one, and one workflow with its steps and compensation trail."""

import json
import uuid

from flask import flash, redirect, render_template, request, url_for

from console.auth import current_actor, requires, tenant_scope
from console.domain.saga import ACTIVE, MAX_STEPS
from console.extensions import db
from console.models import Tenant
from console.services.engine import registry
from console.services.errors import ServiceError
from console.services.people import tenants
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery import undo_retry
from console.services.recovery.workflows import query
from console.services.recovery.workflows.submit import submit
from console.web import paging
from console.web.render import page
from console.web.runs.blueprint import bp
from console.web.runs.forms import WorkflowForm
from console.web.tenancy import acting_tenant

EXAMPLE = [{"handler": "python:demo.flaky_compensated", "params": {"fail_times": 0}},
           {"handler": "python:demo.noop", "params": {"order": 7}, "policy": {"max_attempts": 5}}]


@bp.get("/workflows")
@requires(VIEW)
def workflows():
    status = request.args.get("status") or None
    text = " ".join((request.args.get("q") or "").split())[:200] or None
    tenant = (request.args.get("tenant") or "").strip()[:64] or None
    scope = tenant_scope()
    tenants.keep_within(tenant or "", scope, "workflows")  # another tenant's name is a 403, not quietly your own
    found = tenants.find(tenant) if tenant else None
    before = paging.before()
    error, items = None, []
    try:
        items = query.rows(scope=scope, status=status, before=before, text=text, limit=query.PAGE_SIZE + 1,
                           tenant_id=(found.id if found else -1) if tenant else None)  # an unknown name finds none
    except ServiceError as refused:
        error = refused.detail
    # One more than shown: a last page exactly full offered "Older" onto an empty one.
    older = items[query.PAGE_SIZE - 1].id if len(items) > query.PAGE_SIZE else None
    items = items[:query.PAGE_SIZE]
    kept = {name: value for name, value in (("q", text), ("tenant", tenant)) if value}
    return page("runs/workflows.html", "results", items=items, status=status, before=before, older=older,
                notes=query.notes(items), statuses=query.STATUSES, error=error, kept=kept, text=text, tenant=tenant,
                tenant_names=_tenant_names()), 422 if error else 200


def _tenant_names() -> list[str]:
    scope = tenant_scope()
    return [db.session.get(Tenant, scope).name] if scope is not None else [t.name for t in tenants.all_tenants()]


def _form() -> WorkflowForm:
    form = WorkflowForm()
    names = _tenant_names()
    form.tenant.choices = names
    if request.method == "GET":
        form.tenant.data = tenants.DEFAULT if tenants.DEFAULT in names else names[0]
        form.idempotency_key.data = uuid.uuid4().hex
    return form


def _form_page(form: WorkflowForm, status: int = 200):
    handlers = [(name, registry.get(name).compensate is not None) for name in registry.names()]
    return render_template("runs/workflow_form.html", form=form, handlers=handlers, max_steps=MAX_STEPS,
                           example=json.dumps(EXAMPLE, indent=2)), status


@bp.get("/workflows/new")
@requires(OPERATE)
def new_workflow():
    return _form_page(_form())


@bp.post("/workflows/new")
@requires(OPERATE)
def submit_workflow():
    form = _form()
    if not form.validate_on_submit():
        return _form_page(form, 422)
    try:
        tenant = acting_tenant(form.tenant.data or "", "submit workflows")
        workflow, created = submit(tenant, current_actor(), name=form.name.data, steps=form.steps_value(),
                                   idempotency_key=form.idempotency_key.data or "")
    except ServiceError as error:
        db.session.rollback()
        form.attach(error)
        return _form_page(form, error.status)
    flash(f"Submitted workflow #{workflow.id}; step 1 is queued." if created else
          f"This form was already submitted as workflow #{workflow.id}.", "success" if created else "info")
    return redirect(url_for("runs.workflow", workflow_id=workflow.id), 303)


@bp.get("/workflows/<int:workflow_id>")
@requires(VIEW)
def workflow(workflow_id: int):
    detail = query.detail(query.get(workflow_id, tenant_scope()))
    workflow = detail.workflow
    step_runs = {s.step.position: s.run for s in detail.steps if s.run}
    stuck, failed = step_runs.get(workflow.current_step), step_runs.get(workflow.failed_step)
    # An undo is offered only while its letter waits: discarded or resolved, the run page has no such button.
    return page("runs/workflow.html", "detail", d=detail, wf=workflow, live=workflow.status in ACTIVE,
                stuck_undo=undo_retry.offered(stuck) if stuck is not None else None,
                failed_undo=undo_retry.offered(failed) if failed is not None else None)
