"""The dead-letter queue over the API: list and read letters, replay or discard them, ask for a params fix."""

from flask import Blueprint, jsonify, request, url_for

from console.api import serialize
from console.api.common import body, is_id, known_args, no_body, no_unknown, whole_arg
from console.auth import current_actor, requires, tenant_scope
from console.domain import saga
from console.extensions import db
from console.models import Run, Tenant
from console.services.dlq import bulk as dlq_bulk
from console.services.dlq import groups as dlq
from console.services.dlq.filters import PERIODS, Filters, check
from console.services.engine import compensation, control, handler_kinds
from console.services.errors import Forbidden, InvalidInput
from console.services.people import tenants
from console.services.people.permissions import OPERATE, VIEW
from console.services.recovery import bulk_discard, params_fix

bp = Blueprint("dead_letters_api", __name__)
MAX_LIMIT = 200
FILTER_FIELDS = {"status", "code", "handler", "task", "tenant", "q", "age", "group", *(key for span in PERIODS
                                                                                     for key in span)}


def _filters(given: dict) -> Filters:
    """Turn the API's filter fields into the DLQ page's filters, refusing what the page would quietly drop."""
    unknown = set(given) - FILTER_FIELDS
    if unknown:
        raise InvalidInput(f"unknown filter {sorted(unknown)[0]!r}; allowed: {', '.join(sorted(FILTER_FIELDS))}",
                           sorted(unknown)[0])
    texts = {key: value for key, value in given.items() if value not in (None, "")}
    task_id = texts.get("task")
    if isinstance(task_id, int) and not isinstance(task_id, bool):  # a JSON body names a task by its id as a number
        texts["task"] = str(task_id)
    for key, value in texts.items():
        if not isinstance(value, str):
            raise InvalidInput(f"{key} is text" + (" or a task id" if key == "task" else ""), key)
    check(texts)
    if "handler" in texts and "task" in texts:
        raise InvalidInput("filter by handler or by task, not both", "handler")
    scope = tenant_scope()
    if scope is not None and texts.get("tenant") not in (None, db.session.get(Tenant, scope).name):
        raise Forbidden("this token sees only its own tenant's dead letters", "tenant")
    if "tenant" in texts:
        tenants.require(texts["tenant"])  # a misspelt tenant is a 422, not an empty list that reads as "none dead"
    if unseen := dlq.unseen_task(texts.get("task", ""), scope):  # as the page says it
        raise InvalidInput(unseen[0], "task")
    # A bare handler name means a Python handler, as everywhere else (demo.noop is python:demo.noop).
    task = "handler:{}:{}".format(*handler_kinds.parse(texts["handler"])) if "handler" in texts else texts.get(
        "task", "")
    return Filters.parse({**texts, "task": task})


@bp.get("/api/dead-letters")
@requires(VIEW)
def list_dead_letters():
    known_args({*FILTER_FIELDS, "limit", "after"})
    args = request.args
    filters = _filters({key: args.get(key) for key in FILTER_FIELDS if key in args})
    limit = whole_arg("limit", 50, 1, MAX_LIMIT)
    after = whole_arg("after", None, 1, 2**63 - 1)
    page = dlq.entries(filters, tenant_scope(), before=after, limit=limit)
    return jsonify(dead_letters=[serialize.dead_letter(letter) for letter in page.entries], next=page.next_before,
                   filter=filters.describe())


@bp.get("/api/dead-letters/<int:letter_id>")
@requires(VIEW)
def get_dead_letter(letter_id: int):
    letter = dlq.get(letter_id, tenant_scope())
    return jsonify({**serialize.dead_letter(letter), "params": serialize.params(letter.run.params),
                    "run": serialize.run(letter.run)})


@bp.post("/api/dead-letters/<int:letter_id>/replay")
@requires(OPERATE)
def replay_dead_letter(letter_id: int):
    no_body(f"a replay runs with the params as they are; to change them, POST /api/dead-letters/{letter_id}/fix")
    run, closed = control.replay(dlq.get(letter_id, tenant_scope()), current_actor())
    return jsonify(dead_letter_id=letter_id, run_id=run.id, status=run.status, series=run.series,
                   closed_fixes=closed, workflow=_workflow_step(run)), 202, {
        "Location": url_for("worker_api.get_task", run_id=run.id)}


def _workflow_step(run) -> dict | None:
    """Say what the replay did to the saga workflow the run is a step of, as the console's Replay asks first."""
    workflow = run.workflow if run.workflow_id else None
    if workflow is None:
        return None
    return {"id": workflow.id, "step": run.workflow_step, "status": workflow.status,
            "note": saga.replay_consequence(run.workflow_step, workflow.status, workflow.failed_step,
                                            workflow.current_step, compensation.has_undo_step(run.handler))}


@bp.post("/api/dead-letters/<int:letter_id>/discard")
@requires(OPERATE)
def discard_dead_letter(letter_id: int):
    data = body()
    no_unknown(data, {"reason"})
    outcome = bulk_discard.discard_one(dlq.get(letter_id, tenant_scope()), data.get("reason"), current_actor())
    if outcome.approval is None:
        return jsonify(dead_letter_id=letter_id, status="discarded", closed_fixes=outcome.closed_fixes)
    return _filed(outcome)


@bp.post("/api/dead-letters/discard")
@requires(OPERATE)
def discard_dead_letters():
    data = body()
    no_unknown(data, {"ids", "reason"})
    ids = _ids(data)
    try:
        outcome = bulk_discard.discard(ids, data.get("reason"), current_actor(), tenant_scope())
    except InvalidInput as error:  # the console's form calls the field "id"; this body, "ids"
        raise InvalidInput(error.detail, "ids" if error.field == "id" else error.field) from None
    if outcome.approval is None:
        return jsonify(discarded=outcome.discarded, skipped=outcome.skipped, closed_fixes=outcome.closed_fixes)
    return _filed(outcome)


def _filed(outcome):
    """Answer a discard past what the person may discard in an hour: a request another person approves."""
    approval = outcome.approval
    return jsonify(approval_id=approval.id, status=approval.status, expires_at=serialize.iso(approval.expires_at),
                   count=len(approval.payload["ids"]), skipped=outcome.skipped, threshold=outcome.threshold,
                   discarded_lately=outcome.discarded_lately), 202, {
        "Location": url_for("approvals_api.get_approval", approval_id=approval.id)}


def _ids(data: dict) -> list[int]:
    """Return a body's list of dead letter ids, or say what it must be."""
    ids = data.get("ids")
    if not isinstance(ids, list) or not all(is_id(i) for i in ids):
        raise InvalidInput("ids is a list of dead letter ids (whole numbers a row id can be)", "ids")
    return ids


@bp.post("/api/dead-letters/replay")
@requires(OPERATE)
def replay_matching():
    data = body()
    no_unknown(data, {"filter", "ids", "rate_per_s", "every"})
    if ("filter" in data) == ("ids" in data):
        raise InvalidInput("give either filter (replay all matching) or ids (these dead letters)", "filter")
    rate = data.get("rate_per_s", dlq_bulk.DEFAULT_RATE)
    try:
        if isinstance(rate, bool) or not isinstance(rate, int | float | str) or (
                isinstance(rate, str) and rate != dlq_bulk.FASTEST):  # JSON's number; the form's text is a number
            raise InvalidInput(f"rate_per_s is a number of runs per second, or {dlq_bulk.FASTEST!r}: as fast as it "
                               "safely can", "rate_per_s")
        dlq_bulk.rate_of(rate)
    except InvalidInput as error:  # named as this body names it
        raise InvalidInput(error.detail, "rate_per_s") from None
    if "ids" in data:
        ids = _ids(data)
        try:
            progress = dlq_bulk.start_replay(current_actor(), tenant_scope(), ids=ids, rate=rate)
        except InvalidInput as error:  # the console's form calls the field "id"; this body, "ids"
            raise InvalidInput(error.detail, "ids" if error.field == "id" else error.field) from None
    else:
        if not isinstance(data["filter"], dict):
            raise InvalidInput("filter is an object, e.g. {\"code\": \"db_timeout\"}", "filter")
        filters = _filters(data["filter"])
        if filters.status != "open":
            raise InvalidInput("only open dead letters can be replayed", "status")
        if data.get("every") not in (None, False, True):
            raise InvalidInput("every is true or false", "every")
        if not filters.narrowed and data.get("every") is not True:
            # As the console asks before "Replay all": an empty filter built by mistake must not replay them all.
            raise InvalidInput("the filter names nothing to narrow it, so it would replay every open dead letter you "
                               "may see, of every tenant and error; name a criterion (code, group, task, …), or send "
                               "\"every\": true to mean all of them", "filter")
        try:
            progress = dlq_bulk.start_replay(current_actor(), tenant_scope(), filters=filters, rate=rate)
        except InvalidInput as error:  # the console's form calls its selection "id"; this body has a filter
            raise InvalidInput(error.detail, "filter" if error.field == "id" else error.field) from None
    return jsonify(serialize.operation(progress)), 202, {
        "Location": url_for("dead_letters_api.get_operation", op_id=progress.op_id)}


@bp.get("/api/operations/<op_id>")
@requires(VIEW)
def get_operation(op_id: str):
    return jsonify(serialize.operation(dlq_bulk.get(op_id, tenant_scope())))


@bp.post("/api/dead-letters/<int:letter_id>/fix")
@requires(OPERATE)
def fix_dead_letter(letter_id: int):
    data = body()
    no_unknown(data, {"params", "reason", "merge"})
    if "params" not in data:
        raise InvalidInput("give the params the run should be replayed with", "params")
    approval = params_fix.request_fix(letter_id, data["params"], data.get("reason"), current_actor(),
                                      tenant_id=tenant_scope(), merge=data.get("merge", False))
    # Once approved the fix replays the run: a saga step's answer says what that does to its workflow, as a replay's.
    return jsonify(approval_id=approval.id, status=approval.status, expires_at=serialize.iso(approval.expires_at),
                   workflow=_workflow_step(db.session.get(Run, approval.payload["run_id"]))), 202, {
        "Location": url_for("approvals_api.get_approval", approval_id=approval.id)}
