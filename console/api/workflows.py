"""Saga workflows over the API: submit one as a unit, list them, read one back with its steps."""

from flask import Blueprint, jsonify, request, url_for

from console.api import serialize
from console.api.common import acting_tenant, body, cursor_arg, known_args, whole_arg
from console.auth import current_actor, requires, tenant_scope
from console.services.errors import InvalidInput
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery.workflows import query
from console.services.recovery.workflows.submit import submit

bp = Blueprint("workflows_api", __name__)
FIELDS = ("tenant", "name", "steps", "idempotency_key")
LIST_ARGS = ("tenant", "status", "q", "limit", "before")
MAX_LIMIT = 200


@bp.post("/api/workflows")
@requires(OPERATE)
def submit_workflow():
    data = body()
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}; allowed: {', '.join(FIELDS)}", unknown[0])
    workflow, created = submit(acting_tenant(data.get("tenant")), current_actor(), name=data.get("name"),
                               steps=data.get("steps"), idempotency_key=data.get("idempotency_key"))
    return jsonify(id=workflow.id, status=workflow.status, created=created), 202 if created else 200, {
        "Location": url_for("workflows_api.get_workflow", workflow_id=workflow.id)}


@bp.get("/api/workflows/<int:workflow_id>")
@requires(VIEW)
def get_workflow(workflow_id: int):
    return jsonify(serialize.workflow(query.detail(query.get(workflow_id, tenant_scope()))))


@bp.get("/api/workflows")
@requires(VIEW)
def list_workflows():
    """Workflows newest first, as the Workflows page lists them: pass `next_before` as `before` for the next page."""
    known_args(LIST_ARGS)
    text = " ".join(request.args.get("q", "").split())
    if len(text) > 200:
        raise InvalidInput("q is at most 200 characters", "q")
    tenant = acting_tenant(request.args["tenant"]).id if request.args.get("tenant") else None
    limit = whole_arg("limit", 50, 1, MAX_LIMIT)
    # One more than asked: a page exactly as long as the rest gave a cursor to an empty page (helper 163).
    found = query.rows(scope=tenant_scope(), status=request.args.get("status") or None, before=cursor_arg("before"),
                       limit=limit + 1, tenant_id=tenant, text=text or None)
    more, found = len(found) > limit, found[:limit]
    notes = query.notes(found)
    return jsonify(workflows=[serialize.workflow_summary(entry, notes.get(entry.id)) for entry in found],
                   next_before=found[-1].id if more else None)
