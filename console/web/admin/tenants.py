"""Admin → Tenants: create a tenant, set its quotas, see what it uses of them now, reserve capacity and cancel it."""

from datetime import UTC

from flask import current_app, flash, redirect, render_template, url_for
from wtforms.fields.choices import SelectChoice

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import SYSTEM_CLOCK
from console.extensions import db
from console.services.errors import ServiceError
from console.services.people import tenants
from console.services.people.permissions import ADMIN
from console.services.scheduling import reservations
from console.web.admin.blueprint import bp
from console.web.admin.forms import QuotaForm, ReserveForm, TenantForm


def _page(form: TenantForm | None = None, failed: tuple[str, QuotaForm] | None = None, status: int = 200,
          reserve: ReserveForm | None = None):
    scope, now = tenant_scope(), SYSTEM_CLOCK()
    rows = tenants.usage(scope)
    quota_forms = {row.tenant.name: failed[1] if failed and failed[0] == row.tenant.name else QuotaForm(
        prefix=f"q-{row.tenant.id}", max_running=str(row.tenant.max_running), max_queued=str(row.tenant.max_queued))
        for row in rows}
    if reserve is None:
        reserve = ReserveForm(prefix="reserve", formdata=None)
    # Several tenants: none chosen in advance, so capacity is never reserved for the first one by mistake.
    reserve.tenant.choices = ([] if scope is not None else [SelectChoice("", "choose a tenant")]) + [
        SelectChoice(row.tenant.name) for row in rows]
    return render_template("admin/tenants.html", rows=rows, quota_forms=quota_forms, form=form or TenantForm(),
                           scoped=scope is not None, reservations=reservations.listing(scope, now),
                           held=reservations.held_now(scope, now), reserve=reserve,
                           capacity=current_app.config["CAPACITY_RUNNING"]), status


def _attach(form, error: ServiceError) -> None:
    (form[error.field].errors if error.field in form else form.form_errors).append(error.detail)


@bp.get("/tenants")
@requires(ADMIN)
def tenants_index():
    return _page()


@bp.post("/tenants")
@requires(ADMIN)
def create_tenant():
    form = TenantForm()
    if not form.validate_on_submit():
        return _page(form, status=422)
    try:
        tenant = tenants.create(form.name.data, current_actor(), max_running=form.max_running.data,
                                max_queued=form.max_queued.data, scope=tenant_scope())
    except ServiceError as error:
        db.session.rollback()
        _attach(form, error)
        return _page(form, status=error.status)
    flash(f"Created tenant {tenant.name}: at most {tenant.max_running} running and {tenant.max_queued} queued.",
          "success")
    return redirect(url_for("admin.tenants_index"), 303)


@bp.post("/tenants/<name>")
@requires(ADMIN)
def set_tenant_quota(name: str):
    tenant = tenants.visible(name, tenant_scope())
    form = QuotaForm(prefix=f"q-{tenant.id}")
    if not form.validate_on_submit():
        return _page(failed=(tenant.name, form), status=422)
    was = (tenant.max_running, tenant.max_queued)
    try:
        tenant = tenants.set_quota(tenant, current_actor(), max_running=form.max_running.data,
                                   max_queued=form.max_queued.data, scope=tenant_scope())
    except ServiceError as error:
        db.session.rollback()
        _attach(form, error)
        return _page(failed=(name, form), status=error.status)
    if (tenant.max_running, tenant.max_queued) == was:
        flash(f"No change to {tenant.name}: it already runs at most {tenant.max_running} and queues "
              f"{tenant.max_queued}.", "info")
    else:
        flash(f"Saved {tenant.name}: at most {tenant.max_running} running and {tenant.max_queued} queued.",
              "success")
    return redirect(url_for("admin.tenants_index"), 303)


# Not /tenants/reservations: that is the quota form's address of a tenant named "reservations".
@bp.post("/tenants/reservations/new")
@requires(ADMIN)
def reserve_capacity():
    form = ReserveForm(prefix="reserve")
    if not form.validate_on_submit():
        return _page(reserve=form, status=422)
    try:
        made = reservations.create(form.tenant.data, current_actor(), running_slots=form.running_slots.data,
                                   queued_runs=form.queued_runs.data, reason=form.reason.data,
                                   starts_at=form.starts_at.data.replace(tzinfo=UTC),
                                   ends_at=form.ends_at.data.replace(tzinfo=UTC), scope=tenant_scope())
    except ServiceError as error:
        db.session.rollback()
        form.attach(error)
        return _page(reserve=form, status=error.status)
    flash(f"Reserved {reservations.holds(made)} for {made['tenant']} from {made['starts_at'][:16].replace('T', ' ')} "
          f"to {made['ends_at'][:16].replace('T', ' ')} UTC (reservation {made['id']}).", "success")
    return redirect(url_for("admin.tenants_index", _anchor="reservations"), 303)


@bp.post("/tenants/reservations/<int:reservation_id>/cancel")
@requires(ADMIN)
def cancel_reservation(reservation_id: int):
    try:
        cancelled = reservations.cancel(reservation_id, current_actor(), scope=tenant_scope())
    except ServiceError as error:
        db.session.rollback()
        if error.status == 404:
            raise
        flash(error.detail, "error")
        return redirect(url_for("admin.tenants_index"), 303)
    flash(f"Cancelled reservation {cancelled['id']} of {cancelled['tenant']}: {reservations.freed(cancelled)}.",
          "success")
    return redirect(url_for("admin.tenants_index", _anchor="reservations"), 303)
