"""Admin → Runbooks: require a second person's approval for any runbook's real runs (high risk always needs it)."""

from flask import flash, redirect, render_template, request, url_for

from console.auth import current_actor, requires, tenant_scope
from console.extensions import db
from console.services.errors import ServiceError
from console.services.people.permissions import ADMIN
from console.services.recovery import runbooks
from console.web.admin.blueprint import bp
from console.web.forms import ConsoleForm


@bp.get("/runbooks")
@requires(ADMIN)
def runbooks_index():
    return render_template("admin/runbooks.html", listed=runbooks.listing(tenant_scope(), latest=0),
                           form=ConsoleForm(), scoped=tenant_scope() is not None)


@bp.post("/runbooks/<name>")
@requires(ADMIN)
def update_runbook(name: str):
    form = ConsoleForm()
    required = request.form.get("requires_approval") == "1"
    try:
        if not form.validate():
            raise ServiceError("the form expired; reload the page and try again")
        runbooks.set_requires_approval(name, required, current_actor(), scope=tenant_scope())
    except ServiceError as error:
        db.session.rollback()
        flash(error.detail, "error")
        return redirect(url_for("admin.runbooks_index"), 303)
    flash(f"Real runs of {name} {'now wait' if required else 'no longer wait'} for a second person's approval"
          + (" (its risk is high, so they still do)." if not required and runbooks.approval_needed(
              runbooks.require(name)) else "."), "success")
    return redirect(url_for("admin.runbooks_index"), 303)
