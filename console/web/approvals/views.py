"""Approvals: the inbox of other people's requests, my requests, all requests, and one request's diff and decision."""

from datetime import UTC, datetime

from flask import Blueprint, flash, redirect, request, session, url_for
from flask_login import current_user

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import db, htmx
from console.models import User
from console.services import inputs
from console.services.errors import InvalidInput, ServiceError
from console.services.people.permissions import APPROVE, OPERATE, ROLL_BACK, VIEW, can
from console.services.recovery import approvals, bulk_discard, decisions, params_fix, runbooks, shown
from console.services.recovery.registry import KINDS
from console.web import nav, paging
from console.web.approvals import present
from console.web.approvals.forms import ApproveForm, RejectForm, RollbackForm, WithdrawForm
from console.web.dlq.views import fixes_of, requests_of
from console.web.render import page, partial

bp = Blueprint("approvals", __name__, url_prefix="/approvals")
PAGE_SIZE = 50
# [request id, status] of a decision refused to a browser without htmx: its redirect lands on a page with that status.
REFUSED = "approval_refused"


@bp.context_processor
def helpers():
    return present.helpers()


def _since() -> datetime | None:
    """Return the time a refresh of My requests carries (when the look before it was), if it is one."""
    try:
        since = inputs.aware_time(request.args.get("since"), "since", "when")
    except InvalidInput:
        return None  # a bad one marks what the stored time does: only this person's own rows are at stake
    return since.astimezone(UTC) if since else None


def _list(tab: str, status: str | None = None, notice: str | None = None, **filters):
    """Render one tab of the list, a keyset page at a time."""
    now, before = utcnow(), paging.before()
    news, since = set(), None
    if tab == "mine" and before is None:  # read now: the answers beside the nav and tab are no longer news
        # The rows answered since the look before this one are marked, and stay marked through the list's own
        # refreshes (they carry that time), so the marks do not vanish ten seconds after the page opens.
        since = _since() or approvals.seen_at(current_user)
        news = approvals.answered_ids_since(current_user, since, now)
        approvals.mark_requests_seen(current_user, now)
    kind = filters.get("kind")
    found = approvals.rows(status=status, tenant_id=tenant_scope(), before=before, limit=PAGE_SIZE + 1, now=now,
                           **filters)
    more = len(found) > PAGE_SIZE
    found = found[:PAGE_SIZE]
    query = {name: value for name, value in (("status", status), ("kind", kind)) if value} if tab == "all" else {}
    waiting, answered = nav.waiting_approvals(), nav.answered_requests()
    return page("approvals/index.html", "results", tab=tab, rows=found, status=status, kind=kind, kinds=KINDS,
                now=now, before=before,
                news=news, since=since, notice=notice,
                older=found[-1].approval.id if more else None, query=query, statuses=approvals.STATUSES,
                refresh=partial(),  # the list's own refresh: the counts beside it are swapped too (oob)
                waiting=waiting, answered=answered, in_nav=nav.in_approvals(waiting, answered))


@bp.get("", strict_slashes=False)
@requires(VIEW)
def index():
    # People who decide land on what waits for them; people who ask, on their own requests; people who read
    # (viewers, managers), on every request: each one's page is theirs to read too, from a run's timeline.
    if not can(current_user.role, OPERATE):
        return redirect(url_for("approvals.everything"))
    if not can(current_user.role, APPROVE):
        return redirect(url_for("approvals.mine"))
    return _list("inbox", "pending", decidable_by=current_user.id, live_at=utcnow())


@bp.get("/mine")
@requires(OPERATE)
def mine():
    return _list("mine", requested_by_id=current_user.id)


@bp.get("/all")
@requires(VIEW)
def everything():
    status, kind = request.args.get("status") or None, request.args.get("kind") or None
    status = None if status == "all" else status  # as the API and the CLI say every status (helper 157)
    try:
        shown.check_kind(kind)
    except InvalidInput as refused:
        return _list("all", None if status not in approvals.STATUSES else status,
                     notice=f"Fix the filter: {refused.detail}; every kind is shown."), 422
    if status is not None and status not in approvals.STATUSES:
        # It listed every request, as if no status had been asked for (the API's 422 says why).
        return _list("all", notice=f"Fix the filter: status is one of {', '.join(approvals.STATUSES)}, not "
                                  f"{status[:40]!r}; every status is shown.", kind=kind), 422
    return _list("all", status, kind=kind)


def _show(approval_id: int, *, error: str | None = None, status: int = 200, approve_form=None, reject_form=None,
          rollback_form=None, withdraw_form=None):
    approval = approvals.get(approval_id, tenant_scope())
    now = utcnow()
    state = approvals.status_at(approval, now)
    mine = approval.requested_by_id == current_user.id
    approver = can(current_user.role, APPROVE)
    settled = params_fix.settled(approval) if state == "pending" else None  # its letter was settled another way
    rolled_back_by = db.session.get(User, approval.rolled_back_by_id) if approval.rolled_back_by_id else None
    rollback_possible = present.can_roll_back(approval)
    can_roll_back = approver and not mine and rollback_possible
    letters = present.letters(approval)
    # What else waits on a bulk discard's letters: approving it closes their params fixes, and the approver is the one
    # to know (only the requester's confirm said so).
    others = ({"fixes": fixes_of(letters), "requests": requests_of(letters)}
              if approval.kind == bulk_discard.NAME and state == "pending" else None)
    return page("approvals/show.html", "detail", row=approvals.row(approval), approval=approval, now=now,
                runbook_request=present.runbook_request(approval), run_outcome=present.run_outcome(approval),
                state=state, mine=mine, decidable=approver and not mine and state == "pending" and not settled,
                not_ready=decisions.not_ready(approval) if state == "pending" else None,
                settled=settled, letters=letters, others=others, workflow_note=present.workflow_note(approval),
                run_to_undo=present.run_to_undo(approval),
                can_roll_back=can_roll_back, rollback_by_another=mine and rollback_possible,
                no_rollback=present.no_rollback(approval),
                kept=present.why_kept(approval) if rollback_possible and (can_roll_back or mine) else None,
                rolled_back_by=rolled_back_by.username if rolled_back_by else None,
                approve_form=approve_form or ApproveForm(prefix="approve"),
                reject_form=reject_form or RejectForm(prefix="reject"),
                rollback_form=rollback_form or RollbackForm(prefix="rollback"),
                withdraw_form=withdraw_form or WithdrawForm(prefix="withdraw"), error=error), status


@bp.get("/<int:approval_id>")
@requires(VIEW)
def show(approval_id: int):
    refused = session.pop(REFUSED, None)
    return _show(approval_id, status=refused[1] if refused and refused[0] == approval_id else 200)


def _decide(approval_id: int, form, form_name: str, action, done):
    """Validate the form, call the decision service, then go to the request's page; a refusal is said there.

    `done` says what happened, given the decided request.
    """
    approvals.get(approval_id, tenant_scope())  # 404 before anything for another tenant's request
    if not form.validate_on_submit():
        return _refused(approval_id, form_name, form, 422, [e for errors in form.errors.values() for e in errors])
    try:
        decided = action(approval_id, current_actor(), form.note.data or None, tenant_id=tenant_scope())
    except ServiceError as error:
        db.session.rollback()
        if error.field == "note":
            form.note.errors = [*form.note.errors, error.detail]
        return _refused(approval_id, form_name, form, error.status, [error.detail], error=error.detail)
    flash(done(decided), "success")
    here = url_for("approvals.show", approval_id=approval_id)
    return ("", 204, {"HX-Redirect": here}) if htmx else redirect(here, 303)


def _refused(approval_id: int, form_name: str, form, status: int, said: list[str], error: str | None = None):
    """Answer a refused decision at the request's own address, so a reload posts nothing again: as a work order's
    actions do, htmx gets the page's detail with the refusal beside the typed note; a browser without it is sent
    to the request's page, which flashes the refusal and answers with its status (once: a reload reads 200)."""
    if htmx:
        return _show(approval_id, error=error, status=status, **{form_name: form})
    for message in said:
        flash(message, "error")
    session[REFUSED] = [approval_id, status]
    return redirect(url_for("approvals.show", approval_id=approval_id), 303)


def _approved(decided) -> str:
    """Say what approving did: a data fix ran here; a runbook's execution was queued for a worker."""
    if decided.kind == runbooks.KIND and decided.status == "executed":
        return (f"Approved request #{decided.id}: runbook execution #{decided.subject_id} is queued for a worker; "
                "its page follows it.")
    return f"Approved request #{decided.id}: the change ran ({decided.status.replace('_', ' ')})."


@bp.post("/<int:approval_id>/approve")
@requires(APPROVE)
def approve(approval_id: int):
    return _decide(approval_id, ApproveForm(prefix="approve"), "approve_form", decisions.approve, _approved)


@bp.post("/<int:approval_id>/reject")
@requires(APPROVE)
def reject(approval_id: int):
    return _decide(approval_id, RejectForm(prefix="reject"), "reject_form", decisions.reject,
                   lambda decided: f"Rejected request #{decided.id}; it will never run.")


@bp.post("/<int:approval_id>/rollback")
@requires(APPROVE, ROLL_BACK)
def rollback(approval_id: int):
    return _decide(approval_id, RollbackForm(prefix="rollback"), "rollback_form", decisions.rollback,
                   _rolled_back)


def _rolled_back(decided) -> str:
    if left := decisions.rolled_back_in_part(decided):
        return f"Rolled back request #{decided.id} in part: {left}."
    return f"Rolled back request #{decided.id}: the rows are as they were before it ran."


@bp.post("/<int:approval_id>/withdraw")
@requires(VIEW)  # the service lets only the requester withdraw; whoever could file a request may take it back
def withdraw(approval_id: int):
    return _decide(approval_id, WithdrawForm(prefix="withdraw"), "withdraw_form", decisions.withdraw,
                   lambda decided: f"Withdrew request #{decided.id}; it will never run.")
