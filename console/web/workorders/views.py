"""Work orders: the list with completion and alert latency, one work order's dead letters, and its actions."""

from flask import Blueprint, flash, redirect, request, url_for
from flask_login import current_user
from wtforms.fields.choices import SelectChoice

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.domain.words import agree, listed
from console.extensions import db, htmx
from console.services.delivery import channel_report, manual, targets
from console.services.dlq import groups as dlq_groups
from console.services.dlq.filters import moment, utc
from console.services.errors import Conflict, InvalidInput, ServiceError
from console.services.inputs import is_digits, row_id
from console.services.people import tenants
from console.services.people.permissions import OPERATE, VIEW
from console.services.workorders import changes, notes
from console.services.workorders import orders as workorders
from console.web import paging
from console.web.render import page
from console.web.workorders.forms import AssignForm, CloseForm, NoteForm

bp = Blueprint("workorders", __name__, url_prefix="/workorders")


def _query(status: str, mine: bool, **narrowed: str) -> dict:
    return {key: value for key, value in (("status", "" if status == "active" else status),
                                          ("mine", "1" if mine else ""), *narrowed.items()) if value}


def _narrowed(scope: int | None) -> tuple[dict, int | None, tuple, int | None]:
    """Read the tenant, task and opening period a link asked for (the Reports card's); a bad one says what to fix."""
    tenant = (request.args.get("tenant") or "").strip()[:64]
    tenants.keep_within(tenant, scope, "work orders")
    task = (request.args.get("task") or "").strip()[:40]
    try:
        task_id = row_id(task) if task else None
    except ValueError:
        raise InvalidInput(f"task={task} is not a task id (a whole number from 1)", "task") from None
    if task_id is not None and (unseen := dlq_groups.unseen_task(task, scope)):
        # Another tenant's task read "Only work orders with a dead letter of task #9" over an empty list (helper 155).
        raise InvalidInput(unseen[0], "task")
    asked = {"tenant": tenant, "task": task, **{name: moment((request.args.get(name) or "").strip()[:40])
                                                for name in ("since", "until")}}
    for name in ("since", "until"):
        if request.args.get(name) and not asked[name]:
            raise InvalidInput(f"{name} is a UTC date and time like 2026-12-01T09:00", name)
    found = tenants.find(tenant) if tenant else None
    of_tenant = (found.id if found else -1) if tenant else None  # an unknown name matches nothing
    opened = tuple(utc(asked[name]) if asked[name] else None for name in ("since", "until"))
    return asked, of_tenant, opened, task_id


@bp.get("", strict_slashes=False)
@requires(VIEW)
def index():
    scope, now = tenant_scope(), utcnow()
    status = request.args.get("status") or "active"
    if status not in workorders.FILTERS:
        raise InvalidInput(f"status={status[:40]} is not a work order filter; use one of "
                           f"{', '.join(workorders.FILTERS)}", "status")
    mine = request.args.get("mine") == "1"
    before = paging.before()
    asked, of_tenant, opened, task_id = _narrowed(scope)
    result = workorders.page(status, scope, before, assignee_id=current_user.id if mine else None,
                             of_tenant=of_tenant, opened=opened, task_id=task_id)
    return page("workorders/index.html", "results", result=result, status=status, mine=mine, before=before,
                query=_query(status, mine, **asked), asked=asked, unnarrowed=_query(status, mine),
                counts=workorders.counts(scope),
                completion=workorders.completion(now, scope, of_tenant=of_tenant, opened=opened, task_id=task_id),
                # The page's tenant, when it names one, as the completion beside it (it read the person's scope only).
                latency=channel_report.latency(now, of_tenant if of_tenant is not None else scope), now=now,
                target=workorders.COMPLETION_TARGET, filters=workorders.FILTERS)


def _assign_form(order) -> AssignForm:
    form = AssignForm(prefix="assign")
    form.user.choices = [SelectChoice("", "nobody")] + [
        SelectChoice(str(person.id), f"{person.username} ({person.role})") for person in workorders.assignable(order)]
    if form.user.data is None:
        form.user.data = str(order.assignee_id or "")
    return form


def _detail(order_id: int, *, notice=None, error=None, close_form=None, note_form=None, status=200):
    d = workorders.detail(order_id, tenant_scope())
    # Forms not given are drawn empty, not from the request: after "Note added." the note stayed in its box, and a
    # second press saved it twice (helper 164).
    return page("workorders/show.html", "detail", d=d, order=d.order, notice=notice, error=error,
                assign_form=_assign_form(d.order), close_form=close_form or CloseForm(prefix="close", formdata=None),
                notes=notes.of(order_id), note_form=note_form or NoteForm(prefix="note", formdata=None),
                # Its request can be sent again only to a work-order system that is set up now.
                workorder_system=targets.all_targets()["workorder"].configured, now=utcnow()), status


@bp.get("/<int:order_id>")
@requires(VIEW)
def show(order_id: int):
    return _detail(order_id)


def _in_row() -> bool:
    """Tell whether htmx asked from a row of the list (it swaps that row) rather than from the detail page."""
    return bool(htmx and htmx.target and htmx.target.startswith("wo-row-"))


def _row(order_id: int, error: str | None = None, status: int = 200):
    row = workorders.row(workorders.get(order_id, tenant_scope()))
    return page("workorders/_row.html", "row", row=row, error=error, now=utcnow()), status


def _done(order_id: int, action, message, **failed_context):
    """Carry out an action; answer htmx with the refreshed fragment, others with a redirect and a flash."""
    try:
        action()
    except ServiceError as error:
        db.session.rollback()
        if _in_row():
            return _row(order_id, error.detail, error.status)
        if htmx:
            form = failed_context.get("close_form") or failed_context.get("note_form")
            if form is not None and error.field in form:  # said at the box it is about, not above the page
                form[error.field].errors = [*form[error.field].errors, error.detail]
                return _detail(order_id, status=error.status, **failed_context)
            return _detail(order_id, error=error.detail, status=error.status, **failed_context)
        flash(error.detail, "error")
        return redirect(url_for("workorders.show", order_id=order_id), 303)
    db.session.expire_all()
    message = message() if callable(message) else message
    if _in_row():
        return _row(order_id)
    if htmx:
        return _detail(order_id, notice=message)
    flash(message, "success")
    return redirect(url_for("workorders.show", order_id=order_id), 303)


@bp.post("/<int:order_id>/acknowledge")
@requires(OPERATE)
def acknowledge(order_id: int):
    order = workorders.get(order_id, tenant_scope())
    return _done(order_id, lambda: changes.acknowledge(order, current_actor()),
                 lambda: f"Acknowledged work order #{order_id}; it is assigned to {_assignee(order)}.")


def _assignee(order) -> str:
    if order.assignee_id is None:
        return "nobody"
    return "you" if order.assignee_id == current_user.id else order.assignee.username


@bp.post("/<int:order_id>/assign")
@requires(OPERATE)
def assign(order_id: int):
    order = workorders.get(order_id, tenant_scope())
    raw = str(current_user.id) if request.form.get("me") == "1" else request.form.get("assign-user", "").strip()
    seen = request.form.get("seen")  # whom the page showed it with: "" for nobody; left out by a script

    def act():
        if raw and not is_digits(raw):
            raise InvalidInput("pick a person from the list", "user")
        changes.assign(order, int(raw) if raw else None, current_actor(), seen=_seen_assignee(seen))

    return _done(order_id, act, lambda: f"Work order #{order_id} is assigned to {_assignee(order)}.")


def _seen_assignee(seen: str | None):
    """Read the assignee the page showed: an id, "" for nobody, or left out (changes.AS_READ)."""
    if seen is None:
        return changes.AS_READ
    try:
        return row_id(seen) if seen else None  # bounded: a 30-digit id was compared in SQL (PostgreSQL's 500)
    except ValueError:
        raise InvalidInput("seen is the id of the assignee the page showed, or empty for nobody", "user") from None


@bp.post("/<int:order_id>/close")
@requires(OPERATE)
def close(order_id: int):
    order = workorders.get(order_id, tenant_scope())
    form = CloseForm(prefix="close")
    told = []
    return _done(order_id, lambda: told.extend(changes.close(order, form.note.data, current_actor())),
                 lambda: f"Closed work order #{order_id}. {_told_words(told, order.external_id)}", close_form=form)


def _told_words(channels: list[str], ticket: str | None) -> str:
    """Say who outside Rebound hears of a close: the channels its resolve goes to, and the ticket nobody closes."""
    if channels:
        names = listed([targets.SPOKEN.get(name, name) for name in channels])
        told = f"{names[:1].upper()}{names[1:]} {agree(len(channels), 'is', 'are')} told it is resolved."
    else:
        told = "No channel that takes a resolve (PagerDuty, Slack, the alert webhook) is configured: none is told."
    # The work-order system's API (POST /ops/workorders) opens tickets and has no close.
    return f"{told} Close ticket {ticket} in the work-order system: it is not told." if ticket else told


@bp.post("/<int:order_id>/notes")
@requires(OPERATE)
def add_note(order_id: int):
    """A note on the work order: what was tried, found or handed over (the next person on call reads it first)."""
    order = workorders.get(order_id, tenant_scope())
    form = NoteForm(prefix="note")
    return _done(order_id, lambda: notes.add(order, form.note.data, current_actor()), "Note added.", note_form=form)


@bp.post("/<int:order_id>/redeliver")
@requires(OPERATE)
def redeliver(order_id: int):
    scope = tenant_scope()
    request_row = workorders.detail(order_id, scope).request

    def act():
        if request_row is None:
            raise Conflict("this work order has no request to the work-order system", "status")
        manual.redeliver(request_row.id, current_actor(), tenant_id=scope)

    return _done(order_id, act, "Queued the request to the work-order system again; it goes out within seconds.")
