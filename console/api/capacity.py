"""Capacity reservations over the API (seed 001's /ops/capacity/reserve): reserve, list, cancel."""

from flask import Blueprint, jsonify, request, url_for

from console.api.common import body, flag_arg, known_args, no_body, no_unknown
from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import SYSTEM_CLOCK
from console.services.people import tenants
from console.services.people.permissions import ADMIN, VIEW
from console.services.scheduling import reservations

bp = Blueprint("capacity_api", __name__)
FIELDS = {"tenant", "running_slots", "queued_runs", "starts_at", "ends_at", "reason"}


@bp.post("/ops/capacity/reserve")
@requires(ADMIN)
def reserve():
    data = body()
    no_unknown(data, FIELDS)
    created = reservations.create(data.get("tenant"), current_actor(), running_slots=data.get("running_slots"),
                                  queued_runs=data.get("queued_runs"), starts_at=data.get("starts_at"),
                                  ends_at=data.get("ends_at"), reason=data.get("reason"), scope=tenant_scope())
    return jsonify(created), 201, {"Location": url_for("capacity_api.get_reservation", reservation_id=created["id"])}


@bp.get("/ops/capacity/reservations")
@requires(VIEW)
def list_reservations():
    known_args(("tenant", "include_past"))
    past = flag_arg("include_past")
    # ?tenant= as every list takes it: another tenant's, for a tenant-limited caller, is refused (it was ignored).
    named, scope = request.args.get("tenant", "").strip(), tenant_scope()
    tenants.keep_within(named, scope, "reservations")
    tenant_id = tenants.require(named).id if named else None
    return jsonify(reservations=reservations.listing(scope, SYSTEM_CLOCK(), tenant_id=tenant_id, include_past=past))


@bp.get("/ops/capacity/reservations/<reservation_id>")
@requires(VIEW)
def get_reservation(reservation_id: str):
    return jsonify(reservations.get(reservation_id, scope=tenant_scope()))


@bp.delete("/ops/capacity/reservations/<reservation_id>")
@requires(ADMIN)
def cancel(reservation_id: str):
    no_body()
    return jsonify(reservations.cancel(reservation_id, current_actor(), scope=tenant_scope()))
