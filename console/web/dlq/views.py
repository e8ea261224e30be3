"""The DLQ page: open dead letters grouped by error, searched, replayed one by one or in bulk, discarded."""

import json
from dataclasses import replace
from urllib.parse import parse_qsl, urlencode, urlsplit

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from markupsafe import Markup

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import db, htmx
from console.models import Workflow
from console.services.dlq import bulk as dlq_bulk
from console.services.dlq import discards
from console.services.dlq import filters as dlq_filters
from console.services.dlq import groups as dlq
from console.services.engine import control, waiting_fixes
from console.services.engine.transitions import StaleRun
from console.services.errors import Conflict, InvalidInput, NotFound, ServiceError
from console.services.inputs import row_id
from console.services.people import tenants
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery import bulk_discard as bulk_discard_fix
from console.services.recovery import params_fix
from console.web import paging
from console.web.dlq.forms import BulkReplayForm, DiscardForm, FixParamsForm
from console.web.render import page

bp = Blueprint("dlq", __name__, url_prefix="/dlq")


@bp.context_processor
def links():
    def work_order_url(order_id: int) -> str | None:
        # The Work orders area links here once it is registered; until then the order shows inline only.
        if "workorders.show" in current_app.view_functions:
            return url_for("workorders.show", order_id=order_id)
        return None

    return {"work_order_url": work_order_url}


def _view() -> str:
    return "list" if request.values.get("view") == "list" else "groups"


def _opened() -> str:
    """Return the group shown expanded (?open=<fingerprint>, so Back and a shared link keep it open), or ""."""
    value = request.args.get("open", "")
    return value if dlq_filters.FINGERPRINT.fullmatch(value) else ""


def _results(filters: dlq_filters.Filters, view: str, before: int | None = None, notice=None) -> dict:
    """Return what the results region shows: groups, or one page of entries."""
    scope = tenant_scope()
    context = {"filters": filters, "view": view, "before": before, "results_notice": notice, "opened": "",
               "count_cap": dlq.COUNT_CAP, "search_window": dlq_filters.SEARCH_WINDOW,
               "default_rate": dlq_bulk.DEFAULT_RATE, "max_rate": dlq_bulk.MAX_RATE,
               "fast_chunk": dlq_bulk.FAST_CHUNK}
    if view == "list":
        found = dlq.entries(filters, scope, before)
        context.update(letters=found.entries, next_before=found.next_before, search_floor=found.search_floor,
                       replays=dlq.replays(found.entries), task_names=dlq.task_names(found.entries),
                       fixes=_fixes(found.entries), matching=dlq.count_matching(filters, scope))
    else:
        found = dlq.groups(filters, scope)
        context.update(groups=found.groups, more_groups=found.more, matching=found.total,
                       search_floor=found.search_floor)
        opened = _opened()
        if opened and any(group.fingerprint == opened for group in found.groups):
            context.update(opened=opened, **_group_context(opened, replace(filters, group=opened)))
    return context


def _group_context(fingerprint: str, filters: dlq_filters.Filters) -> dict:
    """Return what one expanded group shows: its newest entries."""
    found = dlq.entries(filters, tenant_scope(), limit=10)
    return {"fingerprint": fingerprint, "group_filters": filters, "group_letters": found.entries,
            "group_more": found.next_before is not None, "group_replays": dlq.replays(found.entries),
            "group_task_names": dlq.task_names(found.entries), "group_fixes": _fixes(found.entries)}


def _fixes(letters) -> dict[int, int]:
    """Return the params fix waiting for approval of each open letter shown: letter id → request id."""
    return params_fix.waiting_on([letter.id for letter in letters if letter.status == "open"], utcnow())


@bp.get("/")
@requires(VIEW)
def index():
    scope = tenant_scope()
    filters = dlq_filters.Filters.parse(request.args)
    refused = dlq_filters.refused(request.args)
    op = request.args.get("op", "")
    notice = ("error", "Fix the filter: " + "; ".join(refused) + ".") if refused else None
    # Callables, so an htmx request that renders only the results block does not run their queries.
    return page("dlq/index.html", "results", **_results(filters, _view(), paging.before(),
                                                        notice=notice),
                scoped=scope is not None, bulk_ops=lambda: dlq_bulk.recent(scope, include=op),
                task_choices=lambda: dlq.task_choices(scope), handler_choices=dlq.handler_choices,
                tenant_choices=lambda: [] if scope else [t.name for t in tenants.all_tenants()]), \
        422 if refused else 200


@bp.get("/groups/<fingerprint>")
@requires(VIEW)
def group_entries(fingerprint: str):
    if not dlq_filters.FINGERPRINT.fullmatch(fingerprint):
        raise NotFound(f"no error group {fingerprint!r}")
    filters = dlq_filters.Filters.parse({**request.args.to_dict(), "group": fingerprint})
    if not htmx:
        return redirect(url_for("dlq.index", view="list", **filters.args()))
    return render_template("dlq/_group_entries.html", **_group_context(fingerprint, filters))


def _back(filters: dlq_filters.Filters | None = None, **extra):
    """Redirect to the DLQ page the request came from (keeping its filters), else to the DLQ page (with `filters`)."""
    referrer = urlsplit(request.referrer or "")
    index = url_for("dlq.index")
    if referrer.netloc == request.host and referrer.path == index:
        query = {**dict(parse_qsl(referrer.query)), **extra}
        return redirect(f"{index}?{urlencode(query)}" if query else index, 303)
    return redirect(url_for("dlq.index", **(filters.args() if filters else {}), **extra), 303)


# After a letter is replayed or discarded in its row, the page's count of open letters reads itself again.
def _count_changed(letter) -> dict:
    """Tell the page to read again the counts a row's replay or discard changed: the total and the bulk bar
    (dlq-count), and the header of the letter's group, its count and its Replay button (dlq-group-<fingerprint>)."""
    return {"HX-Trigger": json.dumps({"dlq-count": None, f"dlq-group-{letter.fingerprint}": None})}


def _row(letter, *, error=None, notice=None, notice_run=None, closed_fixes=(), status=200):
    return render_template("dlq/_row.html", letter=letter, replays=dlq.replays([letter]),
                           task_names=dlq.task_names([letter]), selectable=request.form.get("nested") != "1",
                           fixes=_fixes([letter]), error=error, notice=notice, notice_run=notice_run,
                           closed_fixes=closed_fixes), status


def _closed(closed_fixes: list[int]) -> str:
    """Say, after a replay's or discard's own message, which waiting params fixes it closed ("" for none)."""
    return f" The {waiting_fixes.closed_words(closed_fixes)}." if closed_fixes else ""


@bp.post("/<int:dead_letter_id>/replay")
@requires(OPERATE)
def replay(dead_letter_id: int):
    letter = dlq.get(dead_letter_id, tenant_scope())
    try:
        run, closed = control.replay(letter, current_actor())
    except (Conflict, StaleRun) as error:
        db.session.rollback()
        message = getattr(error, "detail", None) or f"run {letter.run_id} changed meanwhile; look again"
        if htmx:
            return _row(letter, error=message, status=409)
        flash(message, "error")
        return _back()
    if htmx:
        html, status = _row(letter, notice=f"Replayed as series {run.series} of", notice_run=run.id,
                            closed_fixes=closed)
        return html, status, _count_changed(letter)
    flash(f"Replayed dead letter {letter.id}: run {run.id} is {run.status} in series {run.series}."
          + _closed(closed), "success")
    return _back()


@bp.post("/<int:dead_letter_id>/discard")
@requires(OPERATE)
def discard(dead_letter_id: int):
    letter = dlq.get(dead_letter_id, tenant_scope())
    form = DiscardForm()
    try:
        if not form.validate_on_submit():
            raise InvalidInput("; ".join(e for errors in form.errors.values() for e in errors), "reason")
        closed = discards.discard(letter, form.reason.data, current_actor())
    except ServiceError as error:
        if htmx:
            return _row(letter, error=error.detail, status=error.status)
        flash(error.detail, "error")
        return _back()
    if htmx:
        html, status = _row(letter, notice="Discarded.", closed_fixes=closed)
        return html, status, _count_changed(letter)
    flash(f"Discarded dead letter {letter.id}." + _closed(closed), "success")
    return _back()


def _start_bulk(back: dlq_filters.Filters | None = None, **selection):
    form = BulkReplayForm()
    try:
        if not form.validate_on_submit():
            raise InvalidInput("; ".join(dict.fromkeys(e for errors in form.errors.values() for e in errors)), "rate")
        rate = dlq_bulk.FASTEST if form.fastest.data else form.rate.data
        progress = dlq_bulk.start_replay(current_actor(), tenant_scope(), rate=rate, **selection)
    except ServiceError as error:
        if htmx:
            return render_template("dlq/_notice.html", category="error", message=error.detail), error.status
        flash(error.detail, "error")
        return _back(back)
    if htmx:
        return render_template("dlq/_progress.html", op=progress)
    pace = "as fast as it safely can" if progress.fastest else f"at {progress.rate:g} runs/s"
    flash(f"Replaying {progress.total} dead letter{'s' if progress.total != 1 else ''} {pace} in the background.",
          "success")
    return _back(back, op=progress.op_id)


@bp.post("/bulk/replay")
@requires(OPERATE)
def bulk_replay():
    return _start_bulk(ids=request.form.getlist("id", type=row_id))


@bp.post("/bulk/replay-matching")
@requires(OPERATE)
def bulk_replay_matching():
    filters = dlq_filters.Filters.parse(request.form)
    confirmed = request.form.get("confirmed") == "failed_for_good"
    if filters.group and not confirmed and dlq.count_non_retryable(filters, tenant_scope()):
        # A group that failed for good: the same input is likely to fail the same way. Ask on a page of its own.
        target = url_for("dlq.confirm_replay", rate=request.form.get("rate"), fastest=request.form.get("fastest"),
                         **filters.args())
        return ("", 204, {"HX-Redirect": target}) if htmx else redirect(target, 303)
    return _start_bulk(filters, filters=filters)


@bp.get("/replay/confirm")
@requires(OPERATE)
def confirm_replay():
    """Say what replaying letters that failed for good means, before it starts."""
    filters = dlq_filters.Filters.parse(request.args)
    scope = tenant_scope()
    total, for_good = dlq.count_matching(filters, scope), dlq.count_non_retryable(filters, scope)
    sample = dlq.entries(filters, scope, limit=1).entries
    return render_template("dlq/confirm_replay.html", filters=filters, total=total, for_good=for_good,
                           sample=sample[0] if sample else None, count_cap=dlq.COUNT_CAP,
                           rate=request.args.get("rate", type=int) or dlq_bulk.DEFAULT_RATE, max_rate=dlq_bulk.MAX_RATE,
                           fastest=request.args.get("fastest") == "y", fast_chunk=dlq_bulk.FAST_CHUNK)


@bp.post("/bulk/discard")
@requires(OPERATE)
def bulk_discard():
    filters = dlq_filters.Filters.parse(request.form)
    try:
        outcome = bulk_discard_fix.discard(request.form.getlist("id", type=row_id), request.form.get("reason"),
                                           current_actor(), tenant_scope())
    except ServiceError as error:
        if htmx:
            # Above the list, not in its place: the rows ticked and the reason typed stay as they were.
            return render_template("dlq/_notice.html", category="error", message=error.detail), error.status, {
                "HX-Retarget": "#bulk-area", "HX-Reswap": "afterbegin"}
        flash(error.detail, "error")
        return _back()
    if outcome.approval is not None:
        count = len(outcome.approval.payload["ids"])
        link = url_for("approvals.show", approval_id=outcome.approval.id)
        message = Markup("Discarding {} dead letters is more than the {} one person may discard at once: "
                         '<a href="{}">request #{}</a> waits for another person with the approve permission.'
                         ).format(count, outcome.threshold, link, outcome.approval.id)
        category = "info"
    else:
        said = [f"Discarded {outcome.discarded} dead letter{'s' if outcome.discarded != 1 else ''}"]
        said += [f"{outcome.skipped} skipped (no longer open)"] if outcome.skipped else []
        said += [waiting_fixes.closed_words(outcome.closed_fixes)] if outcome.closed_fixes else []
        message = "; ".join(said) + "."
        category = "success"
    if htmx:
        return page("dlq/index.html", "results", **_results(filters, _view(), notice=(category, message)))
    flash(message, category)
    return _back()


def _fix_page(letter, form: FixParamsForm, *, error: str | None = None, status: int = 200):
    ttl_s = int(current_app.config["APPROVAL_TTL_S"])
    expires_in = f"{ttl_s // 3600} h" if ttl_s % 3600 == 0 else f"{max(1, ttl_s // 60)} min"
    # A workflow's step replayed alone does not resume its workflow: the page says so before anyone asks.
    workflow = db.session.get(Workflow, letter.run.workflow_id) if letter.run.workflow_id else None
    return render_template("dlq/fix.html", letter=letter, form=form, error=error, expires_in=expires_in,
                           workflow=workflow,
                           waiting=params_fix.waiting_on([letter.id], utcnow()).get(letter.id),
                           current=json.dumps(letter.run.params or {}, indent=2, sort_keys=True, ensure_ascii=False),
                           task_names=dlq.task_names([letter])), status


@bp.get("/<int:dead_letter_id>/fix")
@requires(OPERATE)
def fix_form(dead_letter_id: int):
    letter = dlq.get(dead_letter_id, tenant_scope())
    form = FixParamsForm(params=json.dumps(letter.run.params or {}, indent=2, sort_keys=True, ensure_ascii=False))
    if letter.status != "open":
        return _fix_page(letter, form, error=f"Dead letter {letter.id} is {letter.status}: only an open one can be "
                                             "fixed and replayed.", status=409)
    return _fix_page(letter, form)


@bp.post("/<int:dead_letter_id>/fix")
@requires(OPERATE)
def request_fix(dead_letter_id: int):
    scope = tenant_scope()
    letter = dlq.get(dead_letter_id, scope)
    form = FixParamsForm()
    if not form.validate_on_submit():
        return _fix_page(letter, form, status=422)
    try:
        approval = params_fix.request_fix(letter.id, form.parsed_params, form.reason.data, current_actor(),
                                          tenant_id=scope)
    except ServiceError as error:
        db.session.rollback()
        if error.field in ("params", "reason"):
            form[error.field].errors = [*form[error.field].errors, error.detail]
            return _fix_page(letter, form, status=error.status)
        return _fix_page(letter, form, error=error.detail, status=error.status)
    flash(f"Filed request #{approval.id}: once another person with the approve permission approves it, run "
          f"{letter.run_id} is replayed with the new params.", "success")
    return redirect(url_for("approvals.show", approval_id=approval.id), 303)


@bp.get("/bulk/<op_id>")
@requires(VIEW)
def bulk_progress(op_id: str):
    progress = dlq_bulk.get(op_id, tenant_scope())
    if not htmx:
        return redirect(url_for("dlq.index", op=op_id))
    headers = {} if progress.running else {"HX-Trigger": "dlq-changed"}
    return render_template("dlq/_progress.html", op=progress), 200, headers


@bp.post("/bulk/<op_id>/stop")
@requires(OPERATE)
def bulk_stop(op_id: str):
    try:
        progress = dlq_bulk.stop(op_id, current_actor(), tenant_scope())
    except Conflict as error:
        progress = dlq_bulk.get(op_id, tenant_scope())
        if not htmx:
            flash(error.detail, "error")
    if htmx:
        return render_template("dlq/_progress.html", op=progress)
    return _back(op=op_id)
