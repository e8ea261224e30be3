"""Quota classes: the list with what each holds now, a create form, and per-class edit and delete."""

from flask import Blueprint, abort, flash, redirect, url_for
from wtforms import IntegerField, StringField
from wtforms.validators import InputRequired, Length, NumberRange

from console.auth import current_actor, requires, shared_by_all_tenants, tenant_scope
from console.domain import names
from console.extensions import db
from console.services.errors import ServiceError
from console.services.people.permissions import OPERATE, VIEW
from console.services.scheduling import quota_class_deletion, quota_classes
from console.web.forms import ConsoleForm
from console.web.render import page

bp = Blueprint("quota_classes", __name__, url_prefix="/tasks/quota-classes")
MAX_RUNNING_RULE = f"say how many may run at once: a whole number from 1 to {quota_classes.MAX_RUNNING:,}"


class ClassForm(ConsoleForm):
    name = StringField("Name", validators=[Length(max=64)], render_kw={"autocomplete": "off", "spellcheck": "false"})
    # One sentence for every bad value (empty, not a number, out of range), not WTForms' two.
    max_running = IntegerField("Max running", invalid_value_message=MAX_RUNNING_RULE, validators=[
        InputRequired(MAX_RUNNING_RULE), NumberRange(1, quota_classes.MAX_RUNNING, message=MAX_RUNNING_RULE)])
    description = StringField("Description", validators=[Length(max=255)])


def _index(form: ClassForm, status: int = 200, failed: str | None = None):
    tasks, running = quota_classes.counts(tenant_scope())
    return page("quota_classes/index.html", "content", form=form, classes=quota_classes.all_classes(), tasks=tasks,
                running=running, failed=failed), status


def _possible_or_404(name: str) -> None:
    """Answer 404 for a name no class can have; a missing class with a possible name is said in a flash instead."""
    if not names.is_name(name):
        abort(404, f"There is no quota class named {name[:80]!r}.")


@bp.get("/")
@requires(VIEW)
def index():
    return _index(ClassForm(formdata=None))


@bp.post("/")
@requires(OPERATE)
@shared_by_all_tenants("Quota classes")
def create():
    form = ClassForm()
    if not form.validate_on_submit():
        return _index(form, 422)
    name = (form.name.data or "").strip()
    try:
        quota_classes.create(name, form.max_running.data, current_actor(), description=form.description.data)
    except ServiceError as error:
        db.session.rollback()
        (form[error.field].errors if error.field in form else form.form_errors).append(error.detail)
        return _index(form, error.status)
    flash(f"Created quota class {name}: at most {form.max_running.data} of its tasks' runs at once.", "success")
    return redirect(url_for("quota_classes.index"), 303)


@bp.post("/<name>")
@requires(OPERATE)
@shared_by_all_tenants("Quota classes")
def update(name: str):
    _possible_or_404(name)
    form = ClassForm()
    form.name.data = name  # the name is the address; it is not edited
    if not form.validate_on_submit():
        flash(f"Not saved: {name}: " + "; ".join(e for errors in form.errors.values() for e in errors) + ".", "error")
        return redirect(url_for("quota_classes.index"), 303)
    try:
        quota_classes.change(name, current_actor(), max_running=form.max_running.data,
                             description=form.description.data or "")
    except ServiceError as error:
        db.session.rollback()
        flash(f"Not saved: {error.detail}.", "error")
        return redirect(url_for("quota_classes.index"), 303)
    flash(f"Saved quota class {name}: at most {form.max_running.data} at once.", "success")
    return redirect(url_for("quota_classes.index"), 303)


@bp.post("/<name>/delete")
@requires(OPERATE)
@shared_by_all_tenants("Quota classes")
def delete(name: str):
    _possible_or_404(name)
    try:
        quota_class_deletion.delete(name, current_actor())
    except ServiceError as error:
        db.session.rollback()
        flash(f"Not deleted: {error.detail}.", "error")
        return redirect(url_for("quota_classes.index"), 303)
    flash(f"Deleted quota class {name}.", "success")
    return redirect(url_for("quota_classes.index"), 303)
