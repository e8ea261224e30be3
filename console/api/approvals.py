"""Four-eyes requests over the API: list and read them, approve, reject or roll back another person's."""

from flask import Blueprint, jsonify, request

from console.api.common import body, no_unknown
from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.services.errors import InvalidInput
from console.services.inputs import is_digits
from console.services.people.permissions import APPROVE, ROLL_BACK, VIEW
from console.services.recovery import approvals, decisions, shown

bp = Blueprint("approvals_api", __name__)
MAX_LIMIT = 200


def _whole(name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    if not is_digits(raw) or not low <= int(raw) <= high:
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}", name)
    return int(raw)


@bp.get("/api/approvals")
@requires(VIEW)
def list_approvals():
    limit = _whole("limit", approvals.PAGE_SIZE, 1, MAX_LIMIT)
    before = _whole("before", None, 1, 2**62)
    status = request.args.get("status") or None
    found = approvals.rows(status=None if status == "all" else status, tenant_id=tenant_scope(), before=before,
                           limit=limit + 1)  # "all", as the CLI and the console say it: every status
    now = utcnow()
    return jsonify(items=[shown.as_dict(row, now) for row in found[:limit]],
                   next_before=found[limit - 1].approval.id if len(found) > limit else None)


@bp.get("/api/approvals/<int:approval_id>")
@requires(VIEW)
def get_approval(approval_id: int):
    return jsonify(shown.as_dict(approvals.row(approvals.get(approval_id, tenant_scope())), utcnow()))


def _note() -> str | None:
    data = body() if request.content_length else {}
    no_unknown(data, {"note"})
    return data.get("note")


def _decided(decide):
    approval = decide(current_actor(), _note())
    return jsonify(shown.as_dict(approvals.row(approval), utcnow()))


@bp.post("/api/approvals/<int:approval_id>/approve")
@requires(APPROVE)
def approve(approval_id: int):
    return _decided(lambda actor, note: decisions.approve(approval_id, actor, note, tenant_id=tenant_scope()))


@bp.post("/api/approvals/<int:approval_id>/reject")
@requires(APPROVE)
def reject(approval_id: int):
    return _decided(lambda actor, note: decisions.reject(approval_id, actor, note, tenant_id=tenant_scope()))


@bp.post("/api/approvals/<int:approval_id>/rollback")
@requires(APPROVE, ROLL_BACK)
def rollback(approval_id: int):
    return _decided(lambda actor, note: decisions.rollback(approval_id, actor, note, tenant_id=tenant_scope()))


@bp.post("/api/approvals/<int:approval_id>/withdraw")
@requires(VIEW)  # only its requester may (the service checks), whatever their role now
def withdraw(approval_id: int):
    return _decided(lambda actor, note: decisions.withdraw(approval_id, actor, note, tenant_id=tenant_scope()))
