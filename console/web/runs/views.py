"""Runs: find runs, read one run's timeline, retry or cancel it, ask for its compensation, see many on a Gantt."""

import json
from dataclasses import replace
from datetime import timedelta

from flask import flash, redirect, request, url_for
from flask_login import current_user

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.domain.statuses import ACTIVE_VALUES as LIVE
from console.extensions import db, htmx
from console.services.engine import compensation, control, transitions, waiting_fixes
from console.services.errors import Conflict, ServiceError
from console.services.people import tenants
from console.services.people.permissions import OPERATE, VIEW, can
from console.services.recovery import approvals, run_compensation, undo_retry
from console.services.reports import breaches as breach_list
from console.services.runs import liveness
from console.services.runs import query as runs_query
from console.services.runs import timeline as run_timeline
from console.services.runs.waiting import breaker_resets, held_again_by_breaker, why_waiting
from console.web import paging
from console.web.approvals import present
from console.web.render import page
from console.web.runs.blueprint import bp
from console.web.runs.forms import RunFilterForm, TimelineFilterForm

DEFAULT_WINDOW = timedelta(hours=1)


def pretty(value) -> str:
    """Show a JSON value indented, for params and results."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _filter_form(form_class, scope: int | None):
    # Another tenant's filter is refused as the DLQ refuses it (403), not taken for a typo in the filter.
    tenants.keep_within(request.args.get("tenant", ""), scope, "runs")
    args = request.args
    for alias, name in form_class.ALIASES.items():
        if alias in args and name not in args:
            args = args.copy()
            args.setlist(name, args.poplist(alias))
    form = form_class(args)
    form.fill_choices(runs_query.tenant_options(scope), runs_query.task_options(scope, asked=form.task.data or ""))
    return form


def _tenant_ids(scope: int | None) -> dict[str, int]:
    return {tenant.name: tenant.id for tenant in runs_query.tenant_options(scope)}


@bp.get("", strict_slashes=False)
@requires(VIEW)
def index():
    scope = tenant_scope()
    form = _filter_form(RunFilterForm, scope)
    before = paging.before()
    result, total, status, cap = None, None, 422, runs_query.COUNT_CAP
    if form.validate():
        filters = form.filters(_tenant_ids(scope))
        result = runs_query.page(filters, scope=scope, before=before, limit=form.page_size())
        total, status = runs_query.count(filters, scope=scope, cap=cap), 200
    args = form.query_args()
    # Only a task the form accepted has a limit to show: another id may be no row's, or no number at all.
    late_limit = runs_query.start_limit_of(int(form.task.data)) if (
        form.late.data and form.task.data and not form.task.errors) else None
    # The Reports page's conditions show as notes, each with a link that drops it.
    without = {name: url_for("runs.index", **{key: value for key, value in args.items() if key not in keys})
               for name, keys in (*((name, (name,)) for name in ("handler", "failed", "retried", "late", "duplicated",
                                                                  "conflicted", "ended_from")),
                                  ("series", ("series_from", "series_to")))}
    bulk = _waiting_runs_bulk(filters, form.tenant.data) if result and can(current_user.role, OPERATE) else []
    return page("runs/index.html", "results", form=form, result=result, total=total, count_cap=cap,
                before=before, args=args, scoped=scope is not None, late_limit=late_limit, without=without,
                bulk=bulk,
                resets=breaker_resets(result.runs) if result else {}), status


WAITING_STATUSES = {("retry_wait",): "retry_wait", ("pending",): "pending", ("pending", "retry_wait"): "both"}


def _waiting_runs_bulk(filters: runs_query.RunFilters, tenant: str | None) -> list[tuple[str, str]]:
    """Return (label, link) of the runbooks that retry or cancel every waiting run the list shows, their forms filled
    in: one run at a time was all the page offered (helper 153). None when the list says more than they take."""
    chosen = WAITING_STATUSES.get(tuple(sorted(filters.statuses)))
    if chosen is None or replace(filters, statuses=(), task_id=None, error_code="", tenant_id=None, handler="") != \
            runs_query.RunFilters():
        return []
    # The list's handler filter shows a handler's runs submitted without a task; the runbooks' alone takes its task
    # runs too, so the link says without_task.
    given = {name: value for name, value in (("task", filters.task_id), ("handler", filters.handler),
                                             ("without_task", "1" if filters.handler else ""),
                                             ("code", filters.error_code), ("tenant", tenant)) if value}
    links = [("Retry all now…", url_for("runbooks.show", name="retry_waiting_runs", **given))] \
        if chosen == "retry_wait" else []
    return [*links, ("Cancel all…", url_for("runbooks.show", name="cancel_waiting_runs", status=chosen, **given))]


def _detail(run_id: int, *, error: str | None = None, notice: str | None = None, status: int = 200):
    detail = runs_query.detail(run_id, tenant_scope())
    requests = approvals.about([("run", run_id), *(("dead_letter", letter.id) for letter in detail.dead_letters)])
    waiting = [r for r in requests if r.kind == run_compensation.NAME and r.status == "pending"]
    # A replay closes a params fix waiting on one of the run's letters: the Replay button says so first.
    fix = next((r.id for r in requests if r.kind == waiting_fixes.KIND and approvals.status_at(r, utcnow()) ==
                "pending"), None)
    # A run that died undoing itself, or that its error's severity 3 left for a person: its undo can be run (a
    # replay would run its handler instead).
    offer = undo_retry.offered(detail.run)
    undo_again = offer is not None
    return page("runs/show.html", "detail", d=detail, run=detail.run, live=detail.run.status in LIVE,
                undo_again=undo_again, undo_first=offer == "first",
                undo_reopens=undo_retry.stopped_at(detail.run) if undo_again else None,
                breaches=breach_list.of_run(run_id), waiting_fix=fix,
                compensable=compensation.can_compensate(detail.run) and not waiting, requests=requests,
                waits_because=why_waiting(detail.run, utcnow()), resets=breaker_resets([detail.run]),
                silent=liveness.silence(detail.run, utcnow()),
                error=error, notice=notice, pretty=pretty, **present.helpers()), status


@bp.get("/<int:run_id>")
@requires(VIEW)
def show(run_id: int):
    return _detail(run_id)


def _act(run_id: int, action, verb: str):
    """Carry out one action on a run (it returns the params fixes it closed); answer htmx with the refreshed run,
    others with a redirect."""
    run = control.get_run(run_id, tenant_scope())
    try:
        try:
            closed = action(run, current_actor())
        except transitions.StaleRun:
            raise Conflict(f"run {run_id} changed while you acted on it; look again") from None
    except ServiceError as error:
        db.session.rollback()
        if htmx:
            return _detail(run_id, error=error.detail, status=error.status)
        flash(error.detail, "error")
        return _detail(run_id, status=error.status)
    db.session.expire_all()
    notice = f"{verb} run #{run_id}: it is now {run.status.replace('_', ' ')}" + (
        f" (series {run.series})." if verb == "Replayed" else ".")
    if run.cancel_requested and run.status == "running":
        notice = (f"Asked run #{run_id} to stop: a command is stopped at once, a Python handler at its next "
                  "cancellation check.")
    if verb in ("Retried", "Replayed"):
        notice += _held_by_breaker(run)
    if closed:
        notice += f" The {waiting_fixes.closed_words(closed)}."
    if htmx:
        return _detail(run_id, notice=notice)
    flash(notice, "success")
    return redirect(url_for("runs.show", run_id=run_id), 303)


def _held_by_breaker(run) -> str:
    """Warn that a run sent on now will be held again by its open breaker, and where to reset it."""
    held = held_again_by_breaker(run, utcnow())
    return f" But {held}." if held else ""


@bp.post("/<int:run_id>/retry")
@requires(OPERATE)
def retry(run_id: int):
    # A finished run starts a new series (a replay); a waiting one only has its next retry pulled forward.
    verb = "Retried" if control.get_run(run_id, tenant_scope()).status == "retry_wait" else "Replayed"
    return _act(run_id, _retry, verb)


def _retry(run, actor) -> list[int]:
    return control.retry_now(run, actor)[1]


@bp.post("/<int:run_id>/retry-undo")
@requires(OPERATE)
def retry_undo(run_id: int):
    first = undo_retry.offered(control.get_run(run_id, tenant_scope())) == "first"
    return _act(run_id, _retry_undo, "Ran the undo of" if first else "Retried the undo of")


def _retry_undo(run, actor) -> list[int]:
    return undo_retry.retry(run.id, actor, tenant_id=tenant_scope()).closed_fixes


@bp.post("/<int:run_id>/cancel")
@requires(OPERATE)
def cancel(run_id: int):
    return _act(run_id, _cancel, "Cancelled")


def _cancel(run, actor) -> list[int]:
    control.cancel(run, actor)
    return []  # a cancelled run has no dead letter open, so no params fix waits on one


def _window(start, end, now):
    """Fill in a missing end of the window: an hour up to now by default."""
    if end is None:
        end = now if start is None or start < now else start + DEFAULT_WINDOW
    return start or end - DEFAULT_WINDOW, end


@bp.get("/timeline")
@requires(VIEW)
def timeline():
    scope = tenant_scope()
    form = _filter_form(TimelineFilterForm, scope)
    now = utcnow()
    chart, status = None, 422
    if form.validate():
        filters = form.filters(_tenant_ids(scope))
        start, end = _window(filters.created_from, filters.created_to, now)
        # Show the window actually drawn in the inputs left empty (the URL keeps only what was asked).
        form.created_from.data = form.created_from.data or start.replace(tzinfo=None)
        form.created_to.data = form.created_to.data or end.replace(tzinfo=None)
        built = run_timeline.build(filters, (start, end), scope=scope, now=now)
        chart, status = {"timeline": built, "figure": run_timeline.figure(built).to_json(),
                         "rows": run_timeline.table(built)}, 200
    # A window that reaches now grows while people watch: it refreshes like the other live pages.
    live = chart is not None and not request.args.get("created_to") and chart["timeline"].window[1] >= now
    return page("runs/timeline.html", "chart", form=form, chart=chart, args=form.query_args(),
                scoped=scope is not None, live=live), status


@bp.post("/<int:run_id>/compensate")
@requires(OPERATE)
def compensate(run_id: int):
    """File a person's compensation as a request: another person with the approve permission decides it."""
    try:
        approval = run_compensation.request_compensation(run_id, request.form.get("cause", ""), current_actor(),
                                                         tenant_id=tenant_scope())
    except ServiceError as error:
        db.session.rollback()
        return _detail(run_id, error=error.detail, status=error.status)
    flash(f"Filed request #{approval.id} to compensate run #{run_id}: it runs once another person with the "
          "approve permission approves it.", "success")
    target = url_for("approvals.show", approval_id=approval.id)
    return ("", 204, {"HX-Redirect": target}) if htmx else redirect(target, 303)
