"""What an operator does to one dead letter: replay it, discard it, or ask for its params to be fixed."""

import json

from flask import current_app, flash, redirect, render_template, request, url_for

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import db, htmx
from console.models import Workflow
from console.services.dlq import filters as dlq_filters
from console.services.dlq import groups as dlq
from console.services.engine import control, waiting_fixes
from console.services.errors import Conflict, InvalidInput, ServiceError
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery import bulk_discard, params_fix
from console.web.dlq.blueprint import bp, go_back, list_url
from console.web.dlq.bulk import filed_message
from console.web.dlq.forms import DiscardForm, FixParamsForm
from console.web.dlq.views import fixes_of, held_handlers, requests_of


# After a letter is replayed or discarded in its row, the page's count of open letters reads itself again.
def _count_changed(letter) -> dict:
    """Tell the page to read again the counts a row's replay or discard changed: the total and the bulk bar
    (dlq-count), and the header of the letter's group, its count and its Replay button (dlq-group-<fingerprint>)."""
    return {"HX-Trigger": json.dumps({"dlq-count": None, f"dlq-group-{letter.fingerprint}": None})}


def _row(letter, *, error=None, notice=None, notice_run=None, closed_fixes=(), status=200):
    return render_template("dlq/_row.html", letter=letter, replays=dlq.replays([letter]),
                           task_names=dlq.task_names([letter]), selectable=request.form.get("nested") != "1",
                           fixes=fixes_of([letter]), requests=requests_of([letter]), error=error, notice=notice,
                           notice_run=notice_run, closed_fixes=closed_fixes,
                           held=held_handlers(tenant_scope())), status


def _closed(closed_fixes: list[int]) -> str:
    """Say, after a replay's or discard's own message, which waiting params fixes it closed ("" for none)."""
    return f" The {waiting_fixes.closed_words(closed_fixes)}." if closed_fixes else ""


@bp.get("/<int:dead_letter_id>")
@requires(VIEW)
def letter(dead_letter_id: int):
    """One dead letter's address: its row in the DLQ list, among its error group and with its status."""
    scope = tenant_scope()
    found = dlq.get(dead_letter_id, scope)
    args = {"view": "list", "group": found.fingerprint, "status": found.status if found.status != "open" else None}
    # The page that holds it: below its group's newest page, one that starts at it (the newest page had no row for
    # the anchor in a group of more than 50; helper 136).
    filters = dlq_filters.Filters.parse(args)
    if dlq.count_newer(filters, scope, found.id + 1, dlq.window(filters, scope, utcnow())) >= dlq.PAGE_SIZE:
        args["before"] = found.id + 1
    return redirect(url_for("dlq.index", **args) + f"#dl-{found.id}", 303)


@bp.get("/<int:dead_letter_id>/replays")
@requires(VIEW)
def replays_of(dead_letter_id: int):
    """A letter's replays and their runs' status now, for its row to read again while the newest is at work."""
    letter = dlq.get(dead_letter_id, tenant_scope())
    return render_template("dlq/_replays.html", letter=letter, run=letter.run, replays=dlq.replays([letter]))


@bp.post("/<int:dead_letter_id>/replay")
@requires(OPERATE)
def replay(dead_letter_id: int):
    letter = dlq.get(dead_letter_id, tenant_scope())
    try:
        run, closed = control.replay(letter, current_actor())
    except Conflict as error:  # a StaleRun too: the run moved since it was read
        db.session.rollback()
        message = error.detail
        if htmx:  # replayed from another tab, say: the counts read themselves again too
            return (*_row(letter, error=message, status=409), _count_changed(letter))
        flash(message, "error")
        return go_back()
    if htmx:
        html, status = _row(letter, notice=f"Replayed as series {run.series} of", notice_run=run.id,
                            closed_fixes=closed)
        return html, status, _count_changed(letter)
    flash(f"Replayed dead letter {letter.id}: run {run.id} is {run.status} in series {run.series}."
          + _closed(closed), "success")
    return go_back()


@bp.post("/<int:dead_letter_id>/discard")
@requires(OPERATE)
def discard(dead_letter_id: int):
    letter = dlq.get(dead_letter_id, tenant_scope())
    form = DiscardForm()
    try:
        if not form.validate_on_submit():
            raise InvalidInput("; ".join(e for errors in form.errors.values() for e in errors), "reason")
        outcome = bulk_discard.discard_one(letter, form.reason.data, current_actor())
    except ServiceError as error:
        if htmx:
            return _row(letter, error=error.detail, status=error.status)
        flash(error.detail, "error")
        return go_back()
    if outcome.approval is not None:
        filed = filed_message(outcome)  # the row's notice links the request, as the bulk one does
        if htmx:
            return _row(letter, notice=filed)
        flash(filed, "info")
        return go_back()
    closed = outcome.closed_fixes
    if htmx:
        html, status = _row(letter, notice="Discarded.", closed_fixes=closed)
        return html, status, _count_changed(letter)
    flash(f"Discarded dead letter {letter.id}." + _closed(closed), "success")
    return go_back()


def _fix_page(letter, form: FixParamsForm, *, error: str | None = None, status: int = 200):
    ttl_s = int(current_app.config["APPROVAL_TTL_S"])
    expires_in = f"{ttl_s // 3600} h" if ttl_s % 3600 == 0 else f"{max(1, ttl_s // 60)} min"
    # A workflow's step replayed alone does not resume its workflow: the page says so before anyone asks.
    workflow = db.session.get(Workflow, letter.run.workflow_id) if letter.run.workflow_id else None
    return render_template("dlq/fix.html", letter=letter, form=form, error=error, expires_in=expires_in,
                           workflow=workflow, back=list_url(request.form.get("back")),
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
