"""Conflict templates: the list, the edit form with the tasks a save changes, and every version's diff."""

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from console.auth import current_actor, requires, shared_by_all_tenants, tenant_scope
from console.domain import conflict_rules
from console.extensions import db
from console.services.errors import InvalidInput, ServiceError, StaleVersion
from console.services.people.permissions import OPERATE, VIEW
from console.services.scheduling import template_insight, templates
from console.web import paging, versioned
from console.web.conflict_templates.forms import TemplateForm

bp = Blueprint("conflict_templates", __name__, url_prefix="/tasks/templates")
# Static routes win over /<name>, so these names could never be opened as templates.
RESERVED = {"new", "preview"}
USED_BY_SHOWN = 20
STALE_NEXT_STEP = "see what they changed under Version history and which tasks this save changes now, then save again."


@bp.get("/")
@requires(VIEW)
def index():
    return render_template("conflict_templates/index.html", rows=template_insight.overview(tenant_scope()))


def _preview_context(form: TemplateForm, record) -> dict:
    """Preview which tasks the form's rules change; an invalid value yields its message instead."""
    try:
        return {"preview": template_insight.preview(record, form.to_rules(), tenant_scope()), "preview_error": None}
    except InvalidInput as error:
        return {"preview": None, "preview_error": error.detail}


def _edit_page(form: TemplateForm, record=None, status: int = 200):
    before = paging.before()
    history, older = template_insight.history(record, before) if record else ([], None)
    used_by = (db.session.execute(templates.inheriting(record, tenant_scope()).limit(USED_BY_SHOWN)).scalars().all()
               if record else [])
    # Templates are every tenant's: a person limited to one sees their own tenant's tasks that use it, and is told
    # other tenants' may too, not how many (a count of another tenant's tasks is that tenant's to know).
    context = {"form": form, "record": record, "history": history, "older": older, "used_by": used_by,
               "scoped": tenant_scope() is not None,
               "version": templates.current_version(record) if record else None, "rules": conflict_rules.RULES,
               **_preview_context(form, record)}
    return render_template("conflict_templates/edit.html", **context), status


def _record_or_404(name: str):
    record = templates.find(name)
    if record is None:
        abort(404, f"There is no conflict template named {name!r}.")
    return record


@bp.get("/new")
@requires(OPERATE)
def new():
    form = TemplateForm(formdata=None)
    source = templates.find(request.args.get("from", ""))
    form.fill(templates.rules_of(source) if source else conflict_rules.BUILT_IN)
    if source:
        form.description.data = source.description
    return _edit_page(form)


@bp.post("/new")
@requires(OPERATE)
@shared_by_all_tenants("Conflict templates")
def create():
    form = TemplateForm()
    name = (form.name.data or "").strip()
    valid = form.validate_on_submit()
    if name in RESERVED:
        form.attach("name", f"{name!r} is reserved by the console; choose another name")
    # Every refusal at once, the form's own (the description's length) beside the rules'.
    elif not form.mark_every_refusal(name) and valid:
        return _save(form, name, None)
    return _edit_page(form, status=422)


@bp.get("/<name>")
@requires(VIEW)
def edit(name: str):
    record = _record_or_404(name)
    form = TemplateForm(formdata=None)
    form.fill(templates.rules_of(record))
    form.name.data, form.description.data = record.name, record.description
    form.base_version.data = str(record.current_version)
    return _edit_page(form, record)


@bp.post("/<name>")
@requires(OPERATE)
@shared_by_all_tenants("Conflict templates")
def update(name: str):
    record = _record_or_404(name)
    form = TemplateForm()
    form.name.data = record.name  # the name is the address; it is not edited here
    valid = form.validate_on_submit()
    if form.mark_every_refusal() or not valid:
        return _edit_page(form, record, 422)
    return _save(form, record.name, record)


def _save(form: TemplateForm, name: str, record):
    version_before = record.current_version if record else 0
    try:
        saved = templates.save(name, form.to_rules(), current_actor(), new_only=record is None,
                               description=(form.description.data or "").strip(),
                               base_version=versioned.base_version(form))
    except StaleVersion as error:
        versioned.refuse_stale(form, error, STALE_NEXT_STEP)
        return _edit_page(form, templates.find(name), 409)
    except ServiceError as error:
        db.session.rollback()
        form.attach(error.field, error.detail)
        return _edit_page(form, templates.find(name) if record else None, error.status)
    if saved.current_version == version_before:
        flash(f"No changes to {name}; it stays at version {version_before}.", "info")
    elif version_before == 0:
        flash(f"Created conflict template {name}. Tasks that reference it take the rules they do not set.", "success")
    else:
        version = templates.current_version(saved)
        flash(f"Saved {name} as version {saved.current_version}; it changed {version.tasks_changed} task(s).",
              "success")
    return redirect(url_for("conflict_templates.edit", name=name), 303)


@bp.post("/preview")
@requires(VIEW)
def preview():
    """Redraw the list of tasks the values being typed would change; nothing is saved."""
    form = TemplateForm()
    record = templates.find(request.args.get("template", ""))
    return render_template("conflict_templates/_preview.html", **_preview_context(form, record), record=record)


@bp.post("/<name>/delete")
@requires(OPERATE)
@shared_by_all_tenants("Conflict templates")
def delete(name: str):
    _record_or_404(name)
    try:
        templates.delete(name, current_actor())
    except ServiceError as error:
        flash(f"Not deleted: {error.detail}.", "error")
        return redirect(url_for("conflict_templates.edit", name=name), 303)
    flash(f"Deleted conflict template {name}.", "success")
    return redirect(url_for("conflict_templates.index"), 303)
