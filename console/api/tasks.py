"""Seed 001's task API: register, inspect, pause, resume, trigger, delete."""

from flask import Blueprint, jsonify, request, url_for

from console.api import serialize
from console.api.common import acting_tenant, body, cursor_arg, known_args, no_body, no_unknown, whole_arg
from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.services import inputs
from console.services.engine import handler_kinds
from console.services.errors import InvalidInput
from console.services.people.permissions import OPERATE, VIEW
from console.services.scheduling import conflicts, on_demand, task_query, tasks, template_insight

bp = Blueprint("tasks_api", __name__)
MAX_TEXT = 200


def _task_json(task):
    return serialize.task(task, tasks.next_runs(task, utcnow()), template_insight.template_name(task))


def _with_conflicts(task, before, now) -> dict:
    """The task as answered, with `conflicts_created`: what the save added to its tenant's next 24 h of forecast
    (the form's warning; the API said nothing of 288 mutex overlaps, helper 172), or null. Never refused for it."""
    made = conflicts.created(before, conflicts.marks(task.tenant, now, mutex_key=task.mutex_key, task_id=task.id))
    return {**_task_json(task), "conflicts_created": None if made is None else {
        "counts": made.counts, "first_at": {kind: serialize.iso(at) for kind, at in made.first.items()},
        "summary": made.sentence(), "forecast": url_for("tasks.forecast", tenant=task.tenant.name)}}


def _mutex_key(data: dict) -> str | None:
    key = data.get("mutex_key")
    return key if isinstance(key, str) else None  # anything else is refused by the save itself


@bp.post("/internal/tasks/register")
@requires(OPERATE)
def register():
    data, now = body(), utcnow()
    tenant = acting_tenant(data.get("tenant"))
    before = conflicts.marks(tenant, now, mutex_key=_mutex_key(data))
    task = tasks.register(tenant, data, current_actor())
    return jsonify(_with_conflicts(task, before, now)), 201, {"Location": url_for("tasks_api.get_task",
                                                                                 task_id=task.id)}


@bp.get("/internal/tasks/<int:task_id>")
@requires(VIEW)
def get_task(task_id: int):
    return jsonify(_task_json(tasks.get(task_id, tenant_scope())))


@bp.put("/internal/tasks/<int:task_id>")
@requires(OPERATE)
def edit_task(task_id: int):
    task, data, now = tasks.get(task_id, tenant_scope()), body(), utcnow()
    seen = inputs.aware_time(data.pop("base_updated_at", None), "base_updated_at", "the task's updated_at you read")
    before = conflicts.marks(task.tenant, now, mutex_key=task.mutex_key, task_id=task.id)
    task = tasks.edit(task, data, current_actor(), seen=seen, seen_field="base_updated_at")
    return jsonify(_with_conflicts(task, before, now))


@bp.put("/internal/tasks/<int:task_id>/pause")
@requires(OPERATE)
def pause(task_id: int):
    no_body()
    return jsonify(_task_json(tasks.set_paused(tasks.get(task_id, tenant_scope()), True, current_actor())))


@bp.put("/internal/tasks/<int:task_id>/resume")
@requires(OPERATE)
def resume(task_id: int):
    no_body()
    return jsonify(_task_json(tasks.set_paused(tasks.get(task_id, tenant_scope()), False, current_actor())))


@bp.post("/internal/tasks/<int:task_id>/trigger")
@requires(OPERATE)
def trigger(task_id: int):
    task = tasks.get(task_id, tenant_scope())
    data = body() if request.content_length else {}  # no body (whatever its Content-Type): as the window allows
    no_unknown(data, {"outside_window"})
    outcome = on_demand.run_now(task, current_actor(), outside_window=data.get("outside_window", False))
    where = {"Location": url_for("worker_api.get_task", run_id=outcome.run_id)} if outcome.run_id else {}
    return jsonify(task_id=outcome.task_id, run_id=outcome.run_id, status=outcome.status,
                   reason=outcome.reason), 202, where


@bp.delete("/internal/tasks/<int:task_id>")
@requires(OPERATE)
def delete(task_id: int):
    no_body()
    waiting = tasks.delete(tasks.get(task_id, tenant_scope()), current_actor())
    return jsonify(id=task_id, deleted=True, waiting_runs=waiting)


@bp.get("/internal/tasks/<int:task_id>/runs")
@requires(VIEW)
def task_runs(task_id: int):
    known_args(("limit",))
    limit = whole_arg("limit", 50, 1, 500)
    task = tasks.get(task_id, tenant_scope())
    return jsonify([serialize.run_row(run) for run in tasks.recent_runs(task, limit)])


@bp.get("/internal/tasks")
@requires(VIEW)
def list_tasks():
    """Live tasks, newest first, one keyset page at a time; narrowed by tenant, handler, paused or not, name."""
    known_args(("tenant", "status", "name", "handler", "limit", "before"))
    args, scope = request.args, tenant_scope()
    tenant = acting_tenant(args["tenant"]).name if args.get("tenant") else ""
    status = args.get("status", "")
    if status not in ("", *task_query.STATUSES):
        raise InvalidInput(f"status is one of {', '.join(task_query.STATUSES)}", "status")
    name = args.get("name", "")
    if len(name) > MAX_TEXT:
        raise InvalidInput(f"name is at most {MAX_TEXT} characters", "name")
    handler = args.get("handler", "")
    if len(handler) > MAX_TEXT:
        raise InvalidInput(f"handler is at most {MAX_TEXT} characters", "handler")
    limit = whole_arg("limit", 50, 1, 200)
    rows, next_before = task_query.page(scope=scope, tenant=tenant,
                                        handler="{}:{}".format(*handler_kinds.parse(handler)) if handler else "",
                                        status=status, text=name, before=cursor_arg("before"),
                                        now=utcnow(), limit=limit)
    return jsonify(tasks=[{**serialize.task(row.task, [row.next_firing] if row.next_firing else [], row.template),
                           "last_run": serialize.last_run(row.last_run)} for row in rows],
                   next_before=next_before)
