"""Policies: the list, the edit form with its live backoff preview, and every version's diff."""

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from console.auth import current_actor, requires, shared_by_all_tenants, tenant_scope
from console.domain.policy import RetryPolicy
from console.services.errors import InvalidInput, ServiceError, StaleVersion
from console.services.people.permissions import OPERATE, VIEW
from console.services.policies import insight as policy_insight
from console.services.policies import versions as policies
from console.web import paging, versioned
from console.web.policies.chart import backoff_figure, duration
from console.web.policies.forms import PolicyForm

bp = Blueprint("policies", __name__, url_prefix="/policies")
# Static routes win over /<name>, so these names could never be opened as policies.
RESERVED = {"new", "preview"}
STALE_NEXT_STEP = "see what they changed under Version history, then save again to replace it with your values."


@bp.get("/")
@requires(VIEW)
def index():
    return render_template("policies/index.html", rows=policy_insight.overview(tenant_scope()), duration=duration,
                           scoped=tenant_scope() is not None)


def _preview_context(form: PolicyForm, record) -> dict:
    """Preview what the form spells; an invalid value yields its message instead of a chart."""
    try:
        preview = policy_insight.backoff_preview(form.to_spec(), record, tenant_scope())
    except InvalidInput as error:
        return {"preview": None, "preview_error": form.in_words(error.detail), "figure": None}
    return {"preview": preview, "preview_error": None, "figure": backoff_figure(preview) if preview.schedule else None}


def _edit_page(form: PolicyForm, record=None, status: int = 200):
    before = paging.before()
    history, older = policy_insight.history(record, before) if record else ([], None)
    context = {
        "form": form, "record": record, "history": history, "older": older,
        "version": policies.current_version(record) if record else None,
        "tasks": policy_insight.tasks_using(record, tenant_scope(), limit=20) if record else [],
        "duration": duration, "scoped": tenant_scope() is not None, **_preview_context(form, record),
    }
    return render_template("policies/edit.html", **context), status


def _record_or_404(name: str):
    record = policies.find(name)
    if record is None:
        abort(404, f"There is no retry policy named {name!r}.")
    return record


@bp.get("/new")
@requires(OPERATE)
def new():
    form = PolicyForm(formdata=None)
    source = policies.find(request.args.get("from", ""))
    form.fill(policies.current_version(source).spec if source else RetryPolicy().to_dict())
    if source:
        form.description.data = source.description
    return _edit_page(form)


@bp.post("/new")
@requires(OPERATE)
@shared_by_all_tenants("Retry policies")
def create():
    form = PolicyForm()
    name = (form.name.data or "").strip()
    if form.validate_on_submit():
        if name in RESERVED:
            form.attach("name", f"{name!r} is reserved by the console; choose another name")
        elif policies.find(name) is not None:
            form.attach("name", f"a policy named {name!r} exists already; edit it instead")
        else:
            return _save(form, name, None)
    return _edit_page(form, status=422)


@bp.get("/<name>")
@requires(VIEW)
def edit(name: str):
    record = _record_or_404(name)
    form = PolicyForm(formdata=None)
    form.fill(policies.current_version(record).spec)
    form.name.data, form.description.data = record.name, record.description
    form.base_version.data = str(record.current_version)
    return _edit_page(form, record)


@bp.post("/<name>")
@requires(OPERATE)
@shared_by_all_tenants("Retry policies")
def update(name: str):
    record = _record_or_404(name)
    form = PolicyForm()
    form.name.data = record.name  # the name is the address; it is not edited here
    if not form.validate_on_submit():
        return _edit_page(form, record, 422)
    return _save(form, record.name, record)


def _save(form: PolicyForm, name: str, record):
    version_before = record.current_version if record else 0
    description_before = record.description if record else ""
    spec = form.to_spec()
    found = policies.problems(spec)
    if found:  # every bad field marked in one answer, not one per submit
        for error in found:
            form.attach(error.field, error.detail)
        return _edit_page(form, record, 422)
    try:
        saved = policies.save(name, spec, current_actor(), description=(form.description.data or "").strip(),
                              base_version=versioned.base_version(form))
    except StaleVersion as error:
        versioned.refuse_stale(form, error, STALE_NEXT_STEP)
        return _edit_page(form, record, 409)
    except ServiceError as error:
        form.attach(error.field, error.detail)
        return _edit_page(form, record, error.status)
    if saved.current_version == version_before and saved.description != description_before:
        flash(f"Saved {name}'s description; its settings stay at version {version_before}.", "success")
    elif saved.current_version == version_before:
        flash(f"No changes to {name}; it stays at version {version_before}.", "info")
    elif version_before == 0:
        flash(f"Created policy {name}. Tasks that name it use it from their next attempt.", "success")
    else:
        flash(f"Saved {name} as version {saved.current_version}; it applies from each run's next attempt.",
              "success")
    return redirect(url_for("policies.edit", name=name), 303)


@bp.post("/preview")
@requires(VIEW)
def preview():
    """Redraw the preview for the values being typed; nothing is saved."""
    form = PolicyForm()
    record = policies.find(request.args.get("policy", ""))
    return render_template("policies/_preview.html", **_preview_context(form, record), duration=duration)
