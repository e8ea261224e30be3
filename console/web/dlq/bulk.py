"""Many dead letters at once: replayed (ticked, or all matching, at a rate) or discarded; a bulk replay's progress."""

from dataclasses import replace

import redis
from flask import flash, redirect, render_template, request, url_for
from markupsafe import Markup

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import htmx
from console.services.dlq import bulk as dlq_bulk
from console.services.dlq import filters as dlq_filters
from console.services.dlq import groups as dlq
from console.services.engine import waiting_fixes
from console.services.errors import Conflict, InvalidInput, ServiceError
from console.services.inputs import row_id
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery import bulk_discard as bulk_discard_fix
from console.web.dlq.blueprint import bp, go_back
from console.web.dlq.forms import BulkReplayForm
from console.web.dlq.views import chosen_view, held_handlers, results
from console.web.render import page


def _refused(error: ServiceError, back: dlq_filters.Filters | None = None):
    """Say why a bulk replay did not start: above the results (htmx), or in a flash on the page it came from. The
    results read themselves again: what refused it is most often another person's replay or discard since the page
    was drawn (a second tab still offered "Replay 4" on a group gone; helper 142)."""
    if htmx:
        return (render_template("dlq/_notice.html", category="error", message=error.detail), error.status,
                {"HX-Trigger": "dlq-changed"})
    flash(error.detail, "error")
    return go_back(back)


def _start_bulk(back: dlq_filters.Filters | None = None, **selection):
    form = BulkReplayForm()
    try:
        if not form.validate_on_submit():
            raise InvalidInput("; ".join(dict.fromkeys(e for errors in form.errors.values() for e in errors)), "rate")
        rate = dlq_bulk.FASTEST if form.fastest.data else form.rate.data
        progress = dlq_bulk.start_replay(current_actor(), tenant_scope(), rate=rate, **selection)
    except ServiceError as error:
        return _refused(error, back)
    if htmx:
        return render_template("dlq/_progress.html", op=progress)
    pace = "as fast as it safely can" if progress.fastest else f"at {progress.rate:g} runs/s"
    # Said as what happened when the button was pressed: it stays on the page while the panel below moves on.
    flash(f"Started replaying {progress.total} dead letter{'s' if progress.total != 1 else ''} {pace}; the panel "
          "below follows it.", "success")
    return go_back(back, op=progress.op_id)


@bp.post("/bulk/replay")
@requires(OPERATE)
def bulk_replay():
    return _start_bulk(ids=request.form.getlist("id", type=row_id))


@bp.post("/bulk/replay-matching")
@requires(OPERATE)
def bulk_replay_matching():
    filters = dlq_filters.Filters.parse(request.form)
    try:
        dlq_filters.check(request.form)  # a filter dropped would replay more than was asked for
    except InvalidInput as error:
        return _refused(InvalidInput(f"Fix the filter: {error.detail}; nothing was replayed.", error.field), filters)
    # The newest letter the page drew: a group's button says its own (in its address), the bar the page's.
    upto = request.args.get("upto", request.form.get("upto"))
    try:
        newest = _upto(upto)
    except InvalidInput as error:
        return _refused(error, filters)
    if request.form.get("confirmed") != "failed_for_good" and _ask_first(filters, newest):
        target = url_for("dlq.confirm_replay", rate=request.form.get("rate"), fastest=request.form.get("fastest"),
                         upto=newest, **filters.args())
        return ("", 204, {"HX-Redirect": target}) if htmx else redirect(target, 303)
    return _start_bulk(filters, filters=filters, upto=newest)


def _upto(value: str | None) -> int | None:
    """Read the newest dead letter a page drew, which a replay of all that match takes no letter newer than."""
    try:
        return row_id(value) if value is not None else None
    except ValueError:
        raise InvalidInput("the page's newest dead letter (upto) is not an id: reload the page; nothing was replayed",
                           "upto") from None


def _within(filters: dlq_filters.Filters, scope: int | None, newest: int | None) -> dlq_filters.Bounds:
    """Fix the window a replay of all that match would read now, up to the newest letter the page drew."""
    every = dlq.window(filters, scope, utcnow())
    return every if newest is None else replace(every, max_id=newest)


def _ask_first(filters: dlq_filters.Filters, newest: int | None) -> bool:
    """Tell whether a replay of all that match needs a page of its own that says what it would do first."""
    scope = tenant_scope()
    return dlq.needs_explaining(filters, scope, _within(filters, scope, newest))


@bp.get("/replay/confirm")
@requires(OPERATE)
def confirm_replay():
    """Say what replaying letters that failed for good, or workflows' steps, means before it starts."""
    dlq_filters.check(request.args)  # the page must describe what its button would replay, no more
    filters = dlq_filters.Filters.parse(request.args)
    scope = tenant_scope()
    upto = _upto(request.args.get("upto"))
    every = _within(filters, scope, upto)
    total, for_good = (dlq.count_matching(filters, scope, bounds=every),
                       dlq.count_non_retryable(filters, scope, bounds=every))
    sample = dlq.entries(filters, scope, limit=1, within=every).entries
    fixes = sum(dlq.fixes_waiting(filters, scope, every).values())
    # The group's own Replay said so in its dialog; this page, where its largest replays come, did not (helper 164).
    open_now = held_handlers(scope)
    held = open_now.of_group(dlq.runs_behind(filters, scope, every, {key.handler for key in open_now.keys}))
    return render_template("dlq/confirm_replay.html", filters=filters, total=total, for_good=for_good, fixes=fixes,
                           held=held,
                           steps=dlq.workflow_steps(filters, scope, every),
                           described=filters.describe(dlq.group_words(filters.group, scope)),
                           sample=sample[0] if sample else None, count_cap=dlq.COUNT_CAP, upto=upto,
                           rate=request.args.get("rate", type=int) or dlq_bulk.DEFAULT_RATE, max_rate=dlq_bulk.MAX_RATE,
                           fastest=request.args.get("fastest") == "y", fast_chunk=dlq_bulk.FAST_CHUNK)


def filed_message(outcome) -> Markup:
    """Say that a discard past the person's hour was filed, linking the request (a bulk discard's or one letter's)."""
    count = len(outcome.approval.payload["ids"])
    return Markup("{} more than the {} one person may discard in an hour without approval: "
                  '<a href="{}">request #{}</a> waits for another person with the approve permission.').format(
        bulk_discard_fix.over_the_limit(count, outcome), outcome.threshold,
        url_for("approvals.show", approval_id=outcome.approval.id), outcome.approval.id)


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
        return go_back()
    if outcome.approval is not None:
        message, category = filed_message(outcome), "info"
    else:
        said = [f"Discarded {outcome.discarded} dead letter{'s' if outcome.discarded != 1 else ''}"]
        # A tenant-limited person's ticks may name another tenant's letters (a crafted form): not "no longer open".
        unseen = ", or not your tenant's" if tenant_scope() is not None else ""
        said += [f"{outcome.skipped} skipped (no longer open{unseen})"] if outcome.skipped else []
        said += [waiting_fixes.closed_words(outcome.closed_fixes)] if outcome.closed_fixes else []
        message = "; ".join(said) + "."
        category = "success"
    if htmx:
        return page("dlq/index.html", "results", **results(filters, chosen_view(), notice=(category, message)))
    flash(message, category)
    return go_back()


@bp.get("/bulk/<op_id>")
@requires(VIEW)
def bulk_progress(op_id: str):
    try:
        progress = dlq_bulk.get(op_id, tenant_scope())
    except (redis.RedisError, OSError):
        # Its progress lives in Redis: the panel says so and keeps asking, as it would while the replay runs.
        if not htmx:
            return redirect(url_for("dlq.index", op=op_id))
        return render_template("dlq/_progress_unreadable.html", op_id=op_id, was=request.args.get("was", ""))
    if not htmx:
        return redirect(url_for("dlq.index", op=op_id))
    # The list below refreshes once, when the replay ends: not at every later look at how its runs end, which
    # would undo the boxes someone is ticking meanwhile.
    headers = {"HX-Trigger": "dlq-changed"} if not progress.running and request.args.get("was") == "running" else {}
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
    return go_back(op=op_id)
