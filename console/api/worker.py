"""Seed 003's worker API: submit, look up, cancel and compensate work, and retry a failed undo."""

import json

from flask import Blueprint, jsonify, request, url_for
from sqlalchemy import select

from console.api import serialize
from console.api.common import (
    BadRequest,
    UnreadableJSON,
    body,
    no_body,
    no_unknown,
    refuse_chunked,
    submission_tenant,
)
from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import db
from console.json_input import UnusableJSON
from console.models import DeadLetter, RunEvent
from console.services.engine import batch_submit, control
from console.services.engine import submit as submit_service
from console.services.engine.submit import submit
from console.services.errors import InvalidInput
from console.services.inputs import RepeatedKey, one_value_per_key, too_many_digits
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery import run_compensation, undo_retry
from console.services.runs.waiting import why_waiting

bp = Blueprint("worker_api", __name__)
FIELDS = {"handler", "task_id", "tenant", "params", "idempotency_key", "policy"}


@bp.post("/worker/tasks")
@requires(OPERATE)
def submit_task():
    data = body()
    no_unknown(data, FIELDS)
    tenant = submission_tenant(data.get("tenant"), data.get("task_id"))
    task = submit_service.task_for(data["task_id"], tenant) if data.get("task_id") is not None else None
    # The answer reads the run's own columns only: attaching it to the session was 3 % of a submit's CPU.
    run, created = submit(tenant, current_actor(), handler=data.get("handler"), task=task, params=data.get("params"),
                          idempotency_key=data.get("idempotency_key"), policy=data.get("policy"), attach=False)
    # Where to follow it (not url_for: the submit is the engine's hot path, and the rule is fixed).
    answer = {"id": run.id, "status": run.status, "idempotency_key": run.idempotency_key, "created": created}
    if not created:  # the same request again returns what the first one recorded (seed 004), not only where to look
        answer.update(result=run.result, error={"code": run.error_code, "message": run.error_message}
                      if run.error_code else None)
    return jsonify(answer), 202 if created else 200, {"Location": f"/worker/tasks/{run.id}"}


@bp.post("/worker/tasks/batch")
@requires(OPERATE)
def submit_batch():
    """Submit up to 1,000 runs: 202 with one answer per item, each accepted or refused on its own."""
    data = _batch_body()
    no_unknown(data, {"runs"})
    runs = batch_submit.check_size(data.get("runs"))
    if not runs:
        raise InvalidInput("runs is empty: send at least one run", "runs")
    return jsonify(runs=batch_submit.submit_batch(runs, current_actor(), submission_tenant)), 202


def _batch_body() -> dict:
    """Return the JSON object, decoded without the whole-body checks: a bad item is that item's answer."""
    if not request.is_json:
        raise BadRequest("send a JSON object with Content-Type: application/json")
    refuse_chunked()
    try:
        # A key given twice is refused as every other body refuses it: {"amount": 1, "amount": 1000000} stored the
        # last one here (helper 152).
        data = json.loads(request.get_data(cache=False), object_pairs_hook=one_value_per_key)
    except RepeatedKey as repeated:
        raise UnusableJSON(repeated.problem) from None
    except RecursionError:
        raise UnusableJSON("the JSON is nested too deeply to read") from None
    except (json.JSONDecodeError, UnicodeDecodeError):  # said as the other bodies say it, not Python's words
        raise UnreadableJSON("the body is not valid JSON (nor UTF-8 text that holds it)") from None
    except ValueError as error:  # an integer of thousands of digits
        raise UnusableJSON(too_many_digits(error)) from None
    if not isinstance(data, dict):
        raise BadRequest('send a JSON object: {"runs": [...]}')
    return data


@bp.get("/worker/tasks/<int:run_id>")
@requires(VIEW)
def get_task(run_id: int):
    run = control.get_run(run_id, tenant_scope())
    events = db.session.execute(select(RunEvent).where(RunEvent.run_id == run.id).order_by(RunEvent.id)
                                ).scalars().all()
    letter_id = db.session.execute(select(DeadLetter.id).where(DeadLetter.run_id == run.id)
                                   .order_by(DeadLetter.id.desc()).limit(1)).scalar_one_or_none()
    # started_at stays series 1's (the SLA's first start); a replay's own start is its series' first `running`.
    series_started_at = min((event.at for event in events if event.kind == "running" and event.series == run.series),
                            default=None)
    # Seed 003's "mode": Rebound's worker pool is its standalone mode (a local queue and a pool of workers).
    # Why it waits, in the run page's words (a run held by capacity said only status_reason null; helper 132).
    return jsonify({**serialize.run(run, events), "params": serialize.params(run.params), "dead_letter_id": letter_id,
                    "mode": "standalone", "series_started_at": serialize.iso(series_started_at),
                    "waiting": why_waiting(run, utcnow())})


@bp.post("/worker/tasks/<int:run_id>/cancel")
@requires(OPERATE)
def cancel_task(run_id: int):
    no_body()
    run = control.cancel(control.get_run(run_id, tenant_scope()), current_actor())
    return jsonify(id=run.id, status=run.status, cancel_requested=run.cancel_requested)


@bp.post("/worker/tasks/<int:run_id>/compensate")
@requires(OPERATE)
def compensate_task(run_id: int):
    """A person's token asks for an undo; it waits for another person's approval (four eyes)."""
    data = body() if request.content_length else {}
    no_unknown(data, {"cause"})
    approval = run_compensation.request_compensation(run_id, data.get("cause", ""), current_actor(),
                                                     tenant_id=tenant_scope())
    return jsonify(approval_id=approval.id, status="awaiting_approval"), 202, {
        "Location": url_for("approvals_api.get_approval", approval_id=approval.id)}


@bp.post("/worker/tasks/<int:run_id>/retry-undo")
@requires(OPERATE)
def retry_undo_task(run_id: int):
    """Try a failed undo again once its cause is fixed (a replay would run the handler itself, not its undo)."""
    no_body()
    retried = undo_retry.retry(run_id, current_actor(), tenant_id=tenant_scope())
    return jsonify(id=run_id, status="compensating", dead_letters_replayed=retried.letters,
                   workflow_id=retried.workflow_id, params_fixes_closed=retried.closed_fixes), 202
