"""Runbooks over the API: list them, start an execution (202; it runs on a worker), read one back with its log."""

from flask import Blueprint, jsonify, url_for

from console.api.common import body, known_args, no_unknown
from console.api.serialize import iso
from console.auth import current_actor, requires, tenant_scope
from console.domain.secrets import mask_fields
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery import runbooks

bp = Blueprint("runbooks_api", __name__)
FIELDS = ("tenant", "params", "dry_run", "reason")


def _param(param) -> dict:
    return {"name": param.name, "type": str(param.type), "required": param.required, "default": param.shown_default,
            "choices": list(param.choices) or None, "many": param.many, "minimum": param.minimum,
            "maximum": param.maximum, "json_object": param.json_object, "help": param.help}


def _runbook(listed) -> dict:
    runbook = listed.runbook
    return {"name": runbook.name, "title": runbook.title, "description": runbook.description,
            "risk": str(runbook.risk), "scope": runbook.scope, "needs_approval": listed.needs_approval,
            "params": [_param(param) for param in runbook.params]}


def execution_json(execution) -> dict:
    """An execution as the API shows it: for a dry-run the changes it would make, for a real run those it made."""
    rows, _ = runbooks.changes(execution.id, planned=execution.dry_run)
    body = {"id": execution.id, "runbook": execution.runbook, "status": execution.status,
            # Masked for every token, as on the execution's page: no one edits an execution's params, so no role
            # needs its secrets back (an operator's and an approver's token read them in clear; helper 125).
            "dry_run": execution.dry_run, "params": mask_fields(execution.params),
            "changes": [runbooks.as_change(row) for row in rows], "changes_total": execution.changes_total,
            "log": [line for line in execution.log.splitlines() if line], "approval_id": execution.approval_id,
            "tenant": execution.tenant.name if execution.tenant else None, "requested_by": execution.requested_by,
            "reason": execution.reason, "error": execution.error, "created_at": iso(execution.created_at),
            "started_at": iso(execution.started_at), "finished_at": iso(execution.finished_at)}
    if not execution.dry_run and execution.previewed_at is not None:
        planned, _ = runbooks.changes(execution.id, planned=True)
        body["preview_changes"] = [runbooks.as_change(row) for row in planned]
    return body


@bp.get("/api/runbooks")
@requires(VIEW)
def list_runbooks():
    known_args(())
    return jsonify([_runbook(listed) for listed in runbooks.listing(tenant_scope(), latest=0)])


@bp.post("/api/runbooks/<name>/executions")
@requires(OPERATE)
def start(name: str):
    data = body()
    no_unknown(data, FIELDS)
    execution = runbooks.start(name, data.get("params", {}), current_actor(), scope=tenant_scope(),
                               tenant=data.get("tenant"), dry_run=data.get("dry_run", False),
                               reason=data.get("reason"))
    location = url_for("runbooks_api.get_execution", execution_id=execution.id)
    return jsonify(id=execution.id, status=execution.status, approval_id=execution.approval_id), 202, {
        "Location": location}


@bp.get("/api/runbooks/executions/<int:execution_id>")
@requires(VIEW)
def get_execution(execution_id: int):
    return jsonify(execution_json(runbooks.get(execution_id, tenant_scope())))
