"""Tasks: the list, one task's schedule, definition and runs, and the actions an operator takes on it."""

from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from markupsafe import Markup

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.domain.cron import describe
from console.extensions import db, htmx
from console.models import Tenant
from console.services.engine import registry
from console.services.errors import ServiceError
from console.services.inputs import json_text
from console.services.people import tenants
from console.services.people.permissions import OPERATE, VIEW
from console.services.policies import versions as policies
from console.services.reports import breaches as breach_list
from console.services.runs.waiting import breaker_resets
from console.services.scheduling import (
    conflicts,
    on_demand,
    quota_classes,
    task_query,
    tasks,
    template_insight,
    templates,
)
from console.services.scheduling.forecast import forecast as forecast_firings
from console.services.settings import setting
from console.web import paging
from console.web.render import page
from console.web.tasks.forms import NewTaskForm, TaskForm, policy_choices, quota_class_choices, template_choices
from console.web.tenancy import acting_tenant

bp = Blueprint("tasks", __name__, url_prefix="/tasks")
# A list shows the same few expressions many times; describing one takes a parse.
bp.add_app_template_filter(lru_cache(maxsize=1024)(describe), "cron_words")


@bp.app_template_filter("in_zone")
def in_zone(moment, zone: str):
    """Show an aware time on another zone's clock (an unknown zone leaves it as it is)."""
    try:
        return moment.astimezone(ZoneInfo(zone))
    except (ValueError, KeyError):
        return moment


RECENT_RUNS = 20
FILTERS = ("tenant", "handler", "status", "q")


@bp.get("", strict_slashes=False)
@requires(VIEW)
def index():
    scope = tenant_scope()
    filters = {key: request.args.get(key, "").strip() for key in FILTERS}
    if scope is not None:
        filters["tenant"] = ""
    before, now = paging.before(), utcnow()
    rows, next_id = task_query.page(scope=scope, tenant=filters["tenant"], handler=filters["handler"],
                                    status=filters["status"], text=filters["q"], before=before, now=now)
    return page("tasks/index.html", "results", rows=rows, next_id=next_id, filters=filters, now=now, paging=before,
                query={key: value for key, value in filters.items() if value},
                tenant_names=[] if scope is not None else [t.name for t in tenants.all_tenants()],
                handler_names=task_query.handler_names(scope),
                resets=breaker_resets(row.last_run for row in rows if row.last_run))


HORIZONS = {"24h": 24, "7d": 168}
SHOWN_ROWS = 50


@bp.get("/forecast")
@requires(VIEW)
def forecast():
    """Forecast the scheduled tasks' firings (24 h or 7 d) and list the conflicts they will meet."""
    scope, now = tenant_scope(), utcnow()
    horizon = request.args.get("horizon", "24h")
    tenant = request.args.get("tenant", "").strip()
    crowded = request.args.get("crowded", 50, type=int)
    if horizon not in HORIZONS or not 1 <= crowded <= 100_000:
        abort(422, "horizon is 24h or 7d; crowded is a whole number from 1 to 100000")
    if scope is not None:
        tenants.keep_within(tenant, scope, "tasks")  # another tenant's name is refused, as everywhere, not ignored
        tenant = db.session.get(Tenant, scope).name  # a tenant-limited person forecasts their tenant only
    elif tenant and tenants.find(tenant) is None:
        abort(404, f"no tenant named {tenant!r}")
    # A GET writes nothing: `rebound task-dryrun` is what keeps forecasts for the reports' "named" figure.
    result = forecast_firings(now, HORIZONS[horizon], tenant or None, crowded_threshold=crowded)
    return render_template("tasks/forecast.html", result=result, horizon=horizon, tenant=tenant, crowded=crowded,
                           overlaps=_pairs(result.mutex_overlaps),
                           shown=SHOWN_ROWS, tenant_names=[] if scope is not None else
                           [t.name for t in tenants.all_tenants()])


def _pairs(overlaps: list[dict]) -> list[dict]:
    """Fold the overlaps of the same two tasks into one row: how often, the first time, the longest overlap."""
    pairs: dict[tuple, dict] = {}
    for overlap in overlaps:
        first, first_at = overlap["first"].rsplit(" at ", 1)
        second, second_at = overlap["second"].rsplit(" at ", 1)
        key = (overlap["mutex_key"], first, second, overlap["consequence"])
        pair = pairs.setdefault(key, {"mutex_key": key[0], "first": first, "second": second, "times": 0,
                                      "first_at": first_at, "second_at": second_at, "overlap_s": 0,
                                      "basis": overlap["duration_basis"], "consequence": key[3],
                                      "same_task": overlap["same_task"]})
        pair["times"] += 1
        pair["overlap_s"] = max(pair["overlap_s"], overlap["overlap_s"])
    return list(pairs.values())


@bp.get("/<int:task_id>")
@requires(VIEW)
def show(task_id: int):
    return _task_page(tasks.get(task_id, tenant_scope()))


def _task_page(task, status: int = 200, **event_form):
    """The task page; `event_form` keeps what a person typed into Post event, with its error."""
    now = utcnow()
    return render_template("tasks/show.html", task=task, now=now, firings=task_query.next_firings(task, now),
                           rules={source.rule: source for source in template_insight.sources(task)},
                           template_name=template_insight.template_name(task), event_form=event_form,
                           listeners=task_query.listeners(task), **_runs_panel(task)), status


def _runs_panel(task) -> dict:
    """What the recent-runs panel shows: the runs and their SLA breaches."""
    runs = tasks.recent_runs(task, RECENT_RUNS)
    return {"runs": runs, "resets": breaker_resets(runs), "breaches": breach_list.of_task(task.id, utcnow()),
            "run_breaches": breach_list.of_runs([run.id for run in runs])}


@bp.get("/cron-preview")
@requires(VIEW)
def cron_preview():
    preview = task_query.preview(request.args.get("cron", ""), request.args.get("timezone", ""), utcnow())
    return render_template("tasks/_cron_preview.html", preview=preview)


def _toggle(task_id: int, paused: bool):
    task = tasks.set_paused(tasks.get(task_id, tenant_scope()), paused, current_actor())
    notice = f"{'Paused' if paused else 'Resumed'} {task.name}."
    if htmx:
        # The header in place; out of band, the schedule (its firings read "skipped" while paused), the runs panel
        # (its hint says what creates the next run) and the page's flashes, which spoke of what came before.
        now = utcnow()
        firings = task_query.next_firings(task, now)
        return (render_template("tasks/_header.html", task=task, notice=notice)
                + render_template("tasks/_schedule.html", task=task, now=now, firings=firings, oob=True,
                                  event_form={}, listeners=task_query.listeners(task))
                + render_template("tasks/_runs.html", task=task, firings=firings, oob=True, **_runs_panel(task))
                + '<div id="flashes" hx-swap-oob="true"></div>')
    flash(notice, "success")
    return redirect(url_for("tasks.show", task_id=task.id), 303)


@bp.post("/<int:task_id>/pause")
@requires(OPERATE)
def pause(task_id: int):
    return _toggle(task_id, True)


@bp.post("/<int:task_id>/resume")
@requires(OPERATE)
def resume(task_id: int):
    return _toggle(task_id, False)


_REASONS = {
    "window": "outside its execution window; it starts when the window opens",
    "quota": "the tenant's queue is full; it starts when there is room",
    "mutex_forbid": "another run with the same mutex key is active and the concurrency policy is forbid",
}


@bp.post("/<int:task_id>/trigger")
@requires(OPERATE)
def trigger(task_id: int):
    task = tasks.get(task_id, tenant_scope())
    outcome = on_demand.run_now(task, current_actor())
    link = Markup('<a href="/runs/{0}">run #{0}</a>').format(outcome.run_id) if outcome.run_id else None
    if outcome.status == "created" and outcome.reason:
        flash(Markup("Created {} for {}; it waits ({}).").format(link, task.name, _REASONS.get(
            outcome.reason, outcome.reason)), "info")
    elif outcome.status == "created":
        flash(Markup("Queued {} of {}.").format(link, task.name), "success")
    elif link is not None:
        flash(Markup("Created {} of {} but it did not start: {}.").format(link, task.name, _REASONS.get(
            outcome.reason, outcome.reason or outcome.status)), "error")
    else:
        flash(f"{task.name} did not fire: {outcome.reason or outcome.status}.", "error")
    return redirect(url_for("tasks.show", task_id=task.id), 303)



@bp.post("/<int:task_id>/event")
@requires(OPERATE)
def post_event(task_id: int):
    task = tasks.get(task_id, tenant_scope())
    if not task.event:
        abort(404)
    text = request.form.get("data", "").strip() or "{}"
    try:
        outcomes = on_demand.post_event(task, json_text(text, "Data"), current_actor())
    except (ValueError, ServiceError) as error:
        return _task_page(task, getattr(error, "status", 422), text=text, error=str(error))
    flash(Markup("Posted {} to {}: {}").format(task.event, task.tenant.name, _fired(outcomes, task)),
          "success" if any(o.run_id for o in outcomes) else "info")
    return redirect(url_for("tasks.show", task_id=task.id), 303)


def _fired(outcomes: list, task) -> Markup:
    """Say in one sentence what an event did to each task listening for it, the paused ones it skipped too."""
    listeners = task_query.listeners(task)
    names = {listener.id: listener.name for listener in listeners}
    parts = []
    for outcome in outcomes:
        name = names.get(outcome.task_id, f"task #{outcome.task_id}")
        if outcome.run_id and outcome.status == "created":
            link = Markup('<a href="/runs/{0}">run #{0}</a>').format(outcome.run_id)
            waits = _REASONS.get(outcome.reason, outcome.reason)
            parts.append(Markup("{} of {} waits ({})").format(link, name, waits) if waits
                         else Markup("queued {} of {}").format(link, name))
        else:
            parts.append(Markup("{} did not fire ({})").format(name, outcome.reason or outcome.status))
    fired = {outcome.task_id for outcome in outcomes}
    parts += [Markup("{} did not fire (paused)").format(listener.name)
              for listener in listeners if listener.paused and listener.id not in fired]
    return Markup("; ").join(parts) + "." if parts else Markup("no task of the tenant listens for it.")


@bp.post("/<int:task_id>/delete")
@requires(OPERATE)
def delete(task_id: int):
    task = tasks.get(task_id, tenant_scope())
    name = task.name
    tasks.delete(task, current_actor())
    flash(f"Deleted {name}. Its runs stay in the history; it never fires again.", "success")
    return redirect(url_for("tasks.index"), 303)


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
        tasks.edit(task, body, current_actor())
    except ServiceError as error:
        return _refused(form, [error], task_id)
    flash(f"Saved {task.name}.", "success")
    _warn_of_conflicts(task, before, now)
    return redirect(url_for("tasks.show", task_id=task.id), 303)

