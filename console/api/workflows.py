"""Saga workflows over the API: submit one as a unit, read it back with its steps."""

from flask import Blueprint, jsonify, url_for

from console.api import serialize
from console.api.common import acting_tenant, body
from console.auth import current_actor, requires, tenant_scope
from console.services.errors import InvalidInput
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery.workflows import query
from console.services.recovery.workflows.submit import submit

bp = Blueprint("workflows_api", __name__)
FIELDS = ("tenant", "name", "steps", "idempotency_key")


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
