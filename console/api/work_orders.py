"""Work orders over the API: list and read them (one per open error group), acknowledge, assign, note and close
them."""

from flask import Blueprint, jsonify, request, url_for

from console.api import serialize
from console.api.common import acting_tenant, body, cursor_arg, known_args, no_body, no_unknown, task_arg, whole_arg
from console.auth import current_actor, requires, tenant_scope
from console.domain.words import said_back
from console.services.errors import Conflict, InvalidInput
from console.services.people.permissions import OPERATE, VIEW
from console.services.workorders import changes, notes
from console.services.workorders import orders as workorders

bp = Blueprint("work_orders_api", __name__)
MAX_LIMIT = 200
FIELDS = ("status", "tenant", "task", "limit", "before")


@bp.get("/api/work-orders")
@requires(VIEW)
def list_work_orders():
    """Work orders newest first (`status`: active, the default, or open, acknowledged, closed, all)."""
    known_args(FIELDS)
    args = request.args
    status = args.get("status") or "active"
    if status not in workorders.FILTERS:
        raise InvalidInput(f"status is one of {', '.join(workorders.FILTERS)}", "status")
    found = workorders.page(status, tenant_scope(), cursor_arg("before"),
                            limit=whole_arg("limit", 50, 1, MAX_LIMIT),
                            of_tenant=acting_tenant(args["tenant"]).id if args.get("tenant") else None,
                            task_id=task_arg())
    return jsonify(work_orders=[serialize.work_order(row) for row in found.rows], next_before=found.next_before)


@bp.get("/api/work-orders/<int:order_id>")
@requires(VIEW)
def get_work_order(order_id: int):
    """One work order with the ids of its newest dead letters (at most 100)."""
    detail = workorders.detail(order_id, tenant_scope())
    return jsonify({**serialize.work_order(workorders.row(detail.order)),
                    "dead_letters": [{"id": letter.id, "run_id": letter.run_id, "status": letter.status}
                                     for letter in detail.letters],
                    "notes": [_note(note) for note in notes.of(order_id)]})


def _note(note) -> dict:
    return {"id": note.id, "author": note.author, "note": note.body, "created_at": serialize.iso(note.created_at)}


@bp.post("/api/work-orders/<int:order_id>/notes")
@requires(OPERATE)
def add_work_order_note(order_id: int):
    """Add a note (what was tried, found or handed over), open or closed; audited."""
    data = body()
    no_unknown(data, ("note",))
    order = workorders.get(order_id, tenant_scope())
    note = notes.add(order, data.get("note"), current_actor())
    return jsonify(_note(note)), 201, {"Location": url_for("work_orders_api.get_work_order", order_id=order_id)}


@bp.post("/api/work-orders/<int:order_id>/acknowledge")
@requires(OPERATE)
def acknowledge_work_order(order_id: int):
    """Say someone is on it; the token's person takes it if nobody has."""
    no_body()
    order = changes.acknowledge(workorders.get(order_id, tenant_scope()), current_actor())
    return jsonify(serialize.work_order(workorders.row(order)))


@bp.post("/api/work-orders/<int:order_id>/assign")
@requires(OPERATE)
def assign_work_order(order_id: int):
    """Give it to a person (`assignee`: a username, or null for nobody); with `seen`, only if it is still that
    person's (or nobody's, null) as the caller read it. The console's Assign had no API (helper 154)."""
    data = body()
    no_unknown(data, ("assignee", "seen"))
    if "assignee" not in data:
        raise InvalidInput("assignee is required: a username, or null for nobody", "assignee")
    order = workorders.get(order_id, tenant_scope())
    chosen = data["assignee"]
    assignable = {person.username: person.id for person in workorders.assignable(order)}
    # One answer for a name nobody has and one who may not take it: a tenant's token learns no other tenant's people.
    if chosen is not None and (not isinstance(chosen, str) or chosen not in assignable):
        raise InvalidInput(f"assignee is the username of an active operator, approver or admin who can see this work "
                           f"order's tenant, or null for nobody; not {said_back(chosen)}", "assignee")
    seen = changes.AS_READ
    if "seen" in data and data["seen"] is not None and not isinstance(data["seen"], str):
        # A number was a 409 "assigned to nobody, not 12345", as if the work order had changed (helper 163).
        raise InvalidInput("seen is the username the work order was assigned to as you read it, or null for nobody",
                           "seen")
    if "seen" in data:
        holder = order.assignee.username if order.assignee else None
        if data["seen"] != holder:
            raise Conflict(f"work order #{order.id} is assigned to {holder or 'nobody'}, not "
                           f"{said_back(data['seen']) if data['seen'] is not None else 'nobody'}: look again", "seen")
        seen = order.assignee_id
    order = changes.assign(order, assignable.get(chosen), current_actor(), seen=seen)
    return jsonify(serialize.work_order(workorders.row(order)))


@bp.post("/api/work-orders/<int:order_id>/close")
@requires(OPERATE)
def close_work_order(order_id: int):
    """Close it by hand with a note saying what was done; its incident is resolved where it was raised."""
    data = body()
    no_unknown(data, ("note",))
    order = workorders.get(order_id, tenant_scope())
    told = changes.close(order, data.get("note"), current_actor())
    return jsonify({**serialize.work_order(workorders.row(order)), "resolve_sent_to": told})
