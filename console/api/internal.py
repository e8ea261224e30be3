"""Seed 000/001's internal API: manual retry, retry policies, reported events."""

from flask import Blueprint, jsonify, url_for

from console.api import serialize
from console.api.common import acting_tenant, body, is_id, known_args, no_unknown, submission_tenant
from console.auth import current_actor, requires, shared_by_all_tenants, tenant_scope
from console.domain.clock import utcnow
from console.domain.ids import MAX_ID
from console.services import versioning
from console.services.engine import control, executor_reports
from console.services.engine.submit import find_by_key
from console.services.errors import InvalidInput, NotFound
from console.services.people.permissions import OPERATE, VIEW
from console.services.policies import versions as policies
from console.services.runs.waiting import held_again_by_breaker
from console.services.scheduling import definitions, on_demand

bp = Blueprint("internal_api", __name__)
EVENT_FIELDS = ("type", "tenant", "data", "idempotency_key")
RETRY_FIELDS = ("run_id", "idempotency_key", "tenant", "policy")


@bp.post("/internal/tasks/retry")
@requires(OPERATE)
def retry():
    data = body()
    no_unknown(data, RETRY_FIELDS)
    if data.get("run_id") is not None and data.get("idempotency_key") is not None:
        # Both named two runs and the id won without a word: a client could retry the wrong run (helper 163).
        raise InvalidInput("give run_id or idempotency_key, not both", "idempotency_key")
    if is_id(data.get("run_id")):
        run = control.get_run(data["run_id"], tenant_scope())
        # A tenant named beside the id is checked, not ignored: garbage, or another tenant's name, retried the run.
        if data.get("tenant") is not None and acting_tenant(_named(data["tenant"])).id != run.tenant_id:
            raise NotFound(f"run {run.id} is not tenant {data['tenant']}'s")
    elif isinstance(data.get("run_id"), int) and not isinstance(data["run_id"], bool):
        raise NotFound(f"no run has id {data['run_id']}: ids go up to {MAX_ID}")
    elif isinstance(data.get("idempotency_key"), str):
        # Keys are the tenant's own: the same key in two tenants names two runs.
        tenant = acting_tenant(data.get("tenant"))
        run = find_by_key(tenant.id, data["idempotency_key"])
        if run is None:
            raise NotFound(f"no run of tenant {tenant.name} has idempotency key {data['idempotency_key']!r}"
                           + ("" if "tenant" in data or tenant_scope() is not None
                              else "; keys are per tenant: name it with \"tenant\""))
    else:
        raise InvalidInput("give run_id (a number) or idempotency_key", "run_id")
    run, _ = control.retry_now(run, current_actor(), policy=data.get("policy"))
    # Pulled forward under an open breaker, it is held again at once: the answer says so (it read as done).
    note = held_again_by_breaker(run, utcnow())
    return jsonify({**serialize.run(run), **({"note": note} if note else {})}), 202, {
        "Location": url_for("worker_api.get_task", run_id=run.id)}


def _named(tenant):
    """A tenant given as text must name one: "" read as the default tenant, and the 404 said "not tenant 's"."""
    if isinstance(tenant, str) and not tenant.strip():
        raise InvalidInput("tenant is a tenant name", "tenant")
    return tenant


@bp.get("/internal/policies")
@requires(VIEW)
def list_policies():
    known_args(())
    return jsonify([policies.as_dict(record) for record in policies.all_policies()])


@bp.get("/internal/policies/<name>")
@requires(VIEW)
def get_policy(name: str):
    return jsonify(policies.as_dict(policies.get(name)))


@bp.put("/internal/policies/<name>")
@requires(OPERATE)
@shared_by_all_tenants("Retry policies")
def put_policy(name: str):
    data = body()
    description = data.pop("description", None)
    if description is not None and not isinstance(description, str):
        raise InvalidInput("description must be a string", "description")
    base_version = versioning.from_json(data.pop("base_version", None))
    existed = policies.find(name) is not None
    record = policies.save(name, data, current_actor(), description=description, base_version=base_version,
                           merge=True)
    if existed:
        return jsonify(policies.as_dict(record))
    return jsonify(policies.as_dict(record)), 201, {"Location": url_for("internal_api.get_policy", name=record.name)}


# What each executor report takes; a misspelt field (retry_after for retry_after_s) was dropped unseen.
FAILED_FIELDS = ("idempotency_key", "error_code", "message", "retryable", "retry_after_s", "handler", "task_id",
                 "params", "policy", "retry_token")
# Seed 001: "task.execution.updated — progress, result, error code". A status of succeeded (with its result) ends the
# attempt as task.execution.failed's counterpart; failed (with its error_code) is that report under this name.
UPDATED_FIELDS = ("idempotency_key", "progress", "message", "status", "result", "error_code", "retryable",
                  "retry_after_s", "retry_token")
UPDATE_STATUSES = ("running", "succeeded", "failed")


def _report(data: dict, fields: tuple[str, ...]) -> dict:
    """Return an executor's report: the body's `data`, or the body itself when it has none (both are accepted);
    a field it does not take is a 422 naming it."""
    if not isinstance(data.get("data"), dict):
        no_unknown(data, (*fields, "type", "tenant"))
        return data
    # Sent beside `data`, the report's key read as missing, "must be a string of 1-200 characters" (helper 97).
    if misplaced := [name for name in data if name not in ("type", "tenant", "data")]:
        raise InvalidInput(f"{', '.join(misplaced)} goes inside data with the report's other fields", misplaced[0])
    no_unknown(data["data"], fields)
    return data["data"]


def _execution_updated(tenant, report: dict):
    """Answer task.execution.updated: progress of a running attempt, or its end (succeeded with a result, failed
    with an error code)."""
    status = report.get("status", "running")
    if status not in UPDATE_STATUSES:
        raise InvalidInput("status must be running (progress), succeeded (with its result) or failed (with its "
                           "error_code)", "status")
    if status != "running" and "progress" in report:  # an attempt that ended is at 100 % or where it failed
        raise InvalidInput("progress goes with status running: a report that ends the attempt carries none",
                           "progress")
    if status == "failed" or report.get("error_code") is not None:
        if status != "failed":
            raise InvalidInput("error_code goes with status failed: a report of a failure", "error_code")
        if "result" in report:
            raise InvalidInput("result goes with status succeeded, not failed", "result")
        key = report.get("idempotency_key")
        if isinstance(key, str) and find_by_key(tenant.id, key) is None:
            raise NotFound(f"no run with idempotency key {key!r}")  # failed's own report may make one; this may not
        failure = {name: report[name] for name in executor_reports.FAILURE_FIELDS if name in report}
        run, again = executor_reports.report_failure(tenant, failure, current_actor())
        return jsonify(id=run.id, status=run.status, next_retry_at=serialize.iso(run.next_retry_at),
                       duplicate=again), 200 if again else 202
    if status == "succeeded":
        for name in ("retryable", "retry_after_s"):
            if name in report:
                raise InvalidInput(f"{name} goes with status failed, not succeeded", name)
        run, again = executor_reports.report_success(tenant, report, current_actor())
        return jsonify(id=run.id, status=run.status, duplicate=again), 200 if again else 202
    for name in ("result", "retryable", "retry_after_s"):
        if name in report:
            raise InvalidInput(f"{name} goes with a report that ends the attempt (status succeeded or failed)", name)
    run = executor_reports.report_update(tenant, report, current_actor())
    return jsonify(id=run.id, status=run.status), 202


@bp.post("/events")
@requires(OPERATE)
def events():
    data = body()
    kind = data.get("type")
    if kind == "task.execution.failed":
        # A task's failure from a token of every tenant acts for the task's tenant, as a submit of it does.
        report = _report(data, FAILED_FIELDS)
        tenant = submission_tenant(data.get("tenant"), report.get("task_id"))
        run, again = executor_reports.report_failure(tenant, report, current_actor())
        # Where to follow the run, as a submit's answer says (the report may have made it).
        return jsonify(id=run.id, status=run.status, next_retry_at=serialize.iso(run.next_retry_at),
                       duplicate=again), 200 if again else 202, {"Location": url_for("worker_api.get_task",
                                                                                      run_id=run.id)}
    tenant = acting_tenant(data.get("tenant"))
    if kind == "task.execution.updated":
        return _execution_updated(tenant, _report(data, UPDATED_FIELDS))
    if not definitions.is_event_name(kind):
        # As a task's event is checked: a name no task can listen for was a 202 that fired nothing.
        raise InvalidInput("type is a lowercase event name such as order.created (letters, digits and . _ -, at most "
                           "120 characters); task.* names other than task.execution.failed and "
                           "task.execution.updated are reserved", "type")
    no_unknown(data, EVENT_FIELDS)
    outcomes = on_demand.on_event(tenant, kind, data.get("data", {}), current_actor(),
                                  idempotency_key=data.get("idempotency_key"))
    # The tenant it fired in, said back: sent without one, a token of every tenant fires in `default` (helper 106).
    return jsonify(type=kind, tenant=tenant.name, runs=[{"task_id": o.task_id, "run_id": o.run_id, "status": o.status,
                                                         "reason": o.reason} for o in outcomes]), 202
