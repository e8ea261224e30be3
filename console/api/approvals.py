"""Four-eyes requests over the API: list and read them, approve, reject or roll back another person's."""

from flask import Blueprint, jsonify, request

from console.api.common import body, cursor_arg, known_args, no_unknown, whole_arg
from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.services.people.permissions import APPROVE, ROLL_BACK, VIEW
from console.services.recovery import approvals, decisions, shown

bp = Blueprint("approvals_api", __name__)
MAX_LIMIT = 200


@bp.get("/api/approvals")
@requires(VIEW)
def list_approvals():
    known_args(("status", "kind", "limit", "before"))
    limit = whole_arg("limit", approvals.PAGE_SIZE, 1, MAX_LIMIT)
    before = cursor_arg("before")
    status = request.args.get("status") or None  # "all", as the CLI and the console say it: every status
    return jsonify(shown.page(status=None if status == "all" else status, tenant_id=tenant_scope(), before=before,
                              limit=limit, now=utcnow(), kind=request.args.get("kind") or None))


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
