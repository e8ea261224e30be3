"""Runs → Submit a run: the form beside POST /worker/tasks (same service, same checks), audited."""

import uuid

from flask import flash, redirect, render_template, request, url_for

from console.auth import current_actor, requires, tenant_scope
from console.extensions import db
from console.models import Tenant
from console.services.engine import handler_kinds, registry
from console.services.errors import ServiceError
from console.services.people import tenants
from console.services.people.permissions import OPERATE
from console.services.policies import versions as policies
from console.services.runs.manual import submit_by_hand
from console.web.runs.blueprint import bp
from console.web.runs.forms import SubmitRunForm
from console.web.tasks.forms import policy_choices
from console.web.tenancy import acting_tenant


def _form() -> SubmitRunForm:
    form = SubmitRunForm()
    scope = tenant_scope()
    names = [db.session.get(Tenant, scope).name] if scope is not None else [t.name for t in tenants.all_tenants()]
    form.tenant.choices = names
    form.policy.choices = policy_choices([p.name for p in policies.all_policies()])
    if request.method == "GET":
        form.tenant.data = tenants.DEFAULT if tenants.DEFAULT in names else names[0]
        form.handler.data = request.args.get("handler", "")
        form.form_key.data = uuid.uuid4().hex
    return form


def _page(form: SubmitRunForm, status: int = 200):
    handlers = [(f"python:{name}", registry.get(name).description, registry.get(name).compensate is not None)
                for name in registry.names()]
    handlers += [(f"command:{name}", str(entry.get("description") or ""), "undo" in entry)
                 for name, entry in sorted(handler_kinds.readable_commands().items())]
    return render_template("runs/submit.html", form=form, handlers=handlers), status


@bp.get("/new")
@requires(OPERATE)
def new_run():
    return _page(_form())


@bp.post("/new")
@requires(OPERATE)
def submit_run():
    form = _form()
    if not form.validate_on_submit():
        return _page(form, 422)
    try:
        tenant = acting_tenant(form.tenant.data or "", "submit runs")
        run, created = submit_by_hand(tenant, current_actor(), handler=(form.handler.data or "").strip(),
                                      params=form.params_value(), policy=form.policy.data or None,
                                      idempotency_key=form.key())
    except ServiceError as error:
        db.session.rollback()
        form.attach(error)
        return _page(form, error.status)
    # Not its status: a worker may move it on before this page shows, and the page says where it is now.
    flash(f"Submitted run #{run.id}; this page follows it." if created else
          f"Idempotency key {run.idempotency_key} already names run #{run.id}: nothing new was submitted.",
          "success" if created else "info")
    return redirect(url_for("runs.show", run_id=run.id), 303)
