"""Registering a task and editing one: the forms, their refusals, and the conflicts a save creates."""

from functools import lru_cache
from zoneinfo import available_timezones

from flask import flash, redirect, render_template, request, url_for
from markupsafe import Markup

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import db
from console.models import Tenant
from console.services.engine import registry
from console.services.errors import ServiceError
from console.services.people import tenants
from console.services.people.permissions import OPERATE
from console.services.policies import versions as policies
from console.services.scheduling import conflicts, quota_classes, task_query, tasks, templates
from console.services.settings import setting
from console.web.tasks.blueprint import bp
from console.web.tasks.forms import NewTaskForm, TaskForm, policy_choices, quota_class_choices, template_choices
from console.web.tenancy import acting_tenant


def _form_page(form, task=None, status: int = 200):
    preview = task_query.preview(form.cron.data or "", form.timezone.data or "", utcnow())
    return render_template("tasks/form.html", form=form, task=task, preview=preview,
                           handler_names=registry.names(), zone_names=_zone_names()), status


@lru_cache(maxsize=1)
def _zone_names() -> list[str]:
    return sorted(available_timezones())


def _new_form() -> NewTaskForm:
    form = NewTaskForm()
    scope = tenant_scope()
    names = [db.session.get(Tenant, scope).name] if scope is not None else [t.name for t in tenants.all_tenants()]
    form.tenant.choices = names
    if request.method == "GET":
        form.tenant.data = tenants.DEFAULT if tenants.DEFAULT in names else names[0]
    form.policy.choices = policy_choices([p.name for p in policies.all_policies()])
    form.template.choices = template_choices([t.name for t in templates.all_templates()])
    form.quota_class.choices = quota_class_choices([c.name for c in quota_classes.all_classes()])
    if request.method == "GET" and templates.find(setting("TASK_DEFAULTS").template) is not None:
        form.template.data = setting("TASK_DEFAULTS").template
    return form


@bp.get("/new")
@requires(OPERATE)
def new():
    return _form_page(_new_form())


@bp.post("/new")
@requires(OPERATE)
def create():
    form = _new_form()
    if not form.validate_on_submit():
        return _form_page(form, status=422)
    now = utcnow()
    body, unread = form.to_body()
    try:
        tenant = acting_tenant(form.tenant.data or "", "register tasks")
        found = unread + tasks.problems(tenant, body)
        if found:
            return _refused(form, found)
        before = conflicts.marks(tenant, now, mutex_key=body.get("mutex_key"))
        task = tasks.register(tenant, body, current_actor())
    except ServiceError as error:
        return _refused(form, [error])
    flash(f"Registered {task.name}.", "success")
    _warn_of_conflicts(task, before, now)
    return redirect(url_for("tasks.show", task_id=task.id), 303)


def _refused(form, found: list[ServiceError], task_id: int | None = None):
    """Mark every refusal at its field in one answer: 422, or a lone refusal's own status (a taken name is a 409)."""
    # Nothing of a refused save may reach the database, whatever else this request commits; the checks' locks go too.
    db.session.rollback()
    for error in found:
        form.attach(error)
    task = tasks.get(task_id, tenant_scope()) if task_id else None
    return _form_page(form, task, found[0].status if len(found) == 1 else 422)


def _warn_of_conflicts(task, before, now) -> None:
    """Tell, after a save, which conflicts it created in the next 24 h (the save itself is not refused)."""
    made = conflicts.created(before, conflicts.marks(task.tenant, now, mutex_key=task.mutex_key, task_id=task.id))
    if made is not None:
        link = url_for("tasks.forecast", tenant=task.tenant.name)
        flash(Markup('This change creates conflicts in the next 24 h: {}. <a href="{}">See the conflict '
                     "forecast</a>.").format(made.sentence(), link), "warning")


def _edit_form() -> TaskForm:
    form = TaskForm()
    form.policy.choices = policy_choices([p.name for p in policies.all_policies()])
    form.template.choices = template_choices([t.name for t in templates.all_templates()])
    form.quota_class.choices = quota_class_choices([c.name for c in quota_classes.all_classes()])
    return form


@bp.get("/<int:task_id>/edit")
@requires(OPERATE)
def edit(task_id: int):
    task = tasks.get(task_id, tenant_scope())
    form = _edit_form()
    form.fill(tasks.snapshot(task))
    form.seen.data = task.updated_at.isoformat()
    return _form_page(form, task)


@bp.post("/<int:task_id>/edit")
@requires(OPERATE)
def update(task_id: int):
    task = tasks.get(task_id, tenant_scope())
    form = _edit_form()
    if not form.validate_on_submit():
        return _form_page(form, task, 422)
    now = utcnow()
    body, unread = form.to_body()
    try:
        found = unread + tasks.problems(task.tenant, body, task)
        if found:
            return _refused(form, found, task_id)
        before = conflicts.marks(task.tenant, now, mutex_key=task.mutex_key, task_id=task.id)
        tasks.edit(task, body, current_actor(), seen=form.seen_at())
    except ServiceError as error:
        return _refused(form, [error], task_id)
    flash(f"Saved {task.name}.", "success")
    _warn_of_conflicts(task, before, now)
    return redirect(url_for("tasks.show", task_id=task.id), 303)
