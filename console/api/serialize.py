"""JSON shapes of the API's objects (ISO 8601 times with offsets)."""

from flask_login import current_user

from console.domain.clock import utcnow
from console.domain.cron import describe
from console.domain.secrets import mask_fields
from console.models import DeadLetter, Run, RunEvent
from console.services.people.permissions import OPERATE, can


def iso(moment):
    return moment.isoformat() if moment else None


def params(value):
    """Params as this caller may read them: as stored for one who may change them (an operator fixing them), with
    fields named like secrets masked for the rest, as the pages show them (a viewer's token read them in clear).
    Outside a request (the CLI's `runs show --json`) nobody is signed in, so they are masked."""
    role = getattr(current_user, "role", None)  # current_user is None outside a request
    return value if role and can(role, OPERATE) else mask_fields(value)


def event(entry: RunEvent) -> dict:
    return {"at": iso(entry.at), "kind": entry.kind, "from": entry.from_status, "to": entry.to_status,
            "attempt": entry.attempt, "series": entry.series, "retry_token": entry.retry_token,
            "reason": entry.reason, "error_code": entry.error_code, "message": entry.message,
            "next_retry_at": iso(entry.next_retry_at), "worker_id": entry.worker_id,
            "duration_ms": entry.duration_ms, "actor": entry.actor, "data": params(entry.data)}


def run(entry: Run, events: list[RunEvent] | None = None) -> dict:
    body = {
        "id": entry.id, "status": entry.status, "status_reason": entry.status_reason,
        "tenant": entry.tenant.name, "task_id": entry.task_id, "handler": entry.handler,
        "idempotency_key": entry.idempotency_key, "attempt": entry.attempt, "series": entry.series,
        "policy": entry.policy.name if entry.policy else "default", "policy_version": entry.policy_version,
        # What a submission's policy object set over the named policy: a run that stopped after one attempt of a
        # five-attempt policy says why.
        "policy_overrides": entry.policy_overrides or {},
        "progress": {"percent": entry.progress, "message": entry.progress_message},
        "result": entry.result,
        "error": {"code": entry.error_code, "message": entry.error_message} if entry.error_code else None,
        "next_retry_at": iso(entry.next_retry_at), "scheduled_for": iso(entry.scheduled_for),
        "enqueued_at": iso(entry.enqueued_at), "created_at": iso(entry.created_at),
        "started_at": iso(entry.started_at), "finished_at": iso(entry.finished_at),
        # When anything about it last changed: a poller's cue (RunStatus said to read it, and no answer had it).
        "updated_at": iso(entry.updated_at),
        "cancel_requested": entry.cancel_requested, "trace_id": entry.trace_id,
        "workflow": {"id": entry.workflow_id, "step": entry.workflow_step} if entry.workflow_id else None,
    }
    if events is not None:
        body["events"] = [event(e) for e in events]
    return body


def dead_letter(entry: DeadLetter) -> dict:
    return {"id": entry.id, "run_id": entry.run_id, "tenant": entry.tenant.name, "task_id": entry.task_id,
            "handler": entry.handler, "series": entry.series, "attempts": entry.attempts, "reason": entry.reason,
            "error": {"code": entry.error_code, "message": entry.error_message}, "fingerprint": entry.fingerprint,
            "status": entry.status, "work_order_id": entry.work_order_id, "created_at": iso(entry.created_at),
            "resolved_at": iso(entry.resolved_at), "resolved_by": entry.resolved_by,
            "resolution_note": entry.resolution_note}


def operation(progress) -> dict:
    return {"operation_id": progress.op_id, "status": progress.status, "total": progress.total,
            "done": progress.done, "failed": progress.failed, "skipped": progress.skipped,
            "percent": progress.percent, "rate_per_s": "max" if progress.fastest else progress.rate,
            "eta_s": progress.eta_s(utcnow()),
            "selection": progress.filter, "started_at": iso(progress.started_at),
            "finished_at": iso(progress.finished_at), "last_error": progress.last_error or None}


def task(entry, next_runs: list, template: str | None) -> dict:
    return {
        "id": entry.id, "name": entry.name, "tenant": entry.tenant.name, "handler": entry.handler,
        "params": params(entry.params), "cron": entry.cron,
        "cron_description": describe(entry.cron) if entry.cron else None,
        "timezone": entry.timezone, "event": entry.event,
        "policy": entry.policy.name if entry.policy else "default", "policy_overrides": entry.policy_overrides,
        "mutex_key": entry.mutex_key, "concurrency_policy": entry.concurrency_policy, "window": entry.window,
        "jitter_s": entry.jitter_s, "debounce_s": entry.debounce_s, "sla": entry.sla,
        "misfire_grace_s": entry.misfire_grace_s, "quota_class": entry.quota_class,
        "template": template,
        "inherit": sorted(entry.inherits or ()), "paused": entry.paused, "missed_total": entry.missed_total,
        "last_fired_for": iso(entry.last_fired_for), "created_at": iso(entry.created_at),
        "updated_at": iso(entry.updated_at), "next_runs": [iso(moment) for moment in next_runs],
    }


def last_run(entry) -> dict | None:
    """A task's newest run as its list shows it (task_query.LastRun), or None before its first."""
    if entry is None:
        return None
    return {"id": entry.id, "status": entry.status, "status_reason": entry.status_reason, "at": iso(entry.at)}


def run_summary(entry: Run) -> dict:
    """A run as a list shows it: its state and times, without its params, policy or timeline."""
    return {"id": entry.id, "status": entry.status, "status_reason": entry.status_reason,
            "tenant": entry.tenant.name, "task_id": entry.task_id, "handler": entry.handler,
            "idempotency_key": entry.idempotency_key, "attempt": entry.attempt, "series": entry.series,
            "error": {"code": entry.error_code, "message": entry.error_message} if entry.error_code else None,
            "source": entry.source, "scheduled_for": iso(entry.scheduled_for), "created_at": iso(entry.created_at),
            "started_at": iso(entry.started_at), "finished_at": iso(entry.finished_at),
            "next_retry_at": iso(entry.next_retry_at)}


def run_row(entry: Run) -> dict:
    return {"id": entry.id, "status": entry.status, "status_reason": entry.status_reason, "attempt": entry.attempt,
            "scheduled_for": iso(entry.scheduled_for), "enqueued_at": iso(entry.enqueued_at),
            "started_at": iso(entry.started_at), "finished_at": iso(entry.finished_at)}


def work_order(row) -> dict:
    """A work order (orders.Row): its group, state, owner, and its request to the external work-order system."""
    order = row.order
    return {"id": order.id, "tenant": order.tenant.name, "title": order.title, "fingerprint": order.fingerprint,
            "status": order.status, "dead_letters_total": order.dead_letter_count,
            "dead_letters_open": row.open_letters, "assignee": order.assignee.username if order.assignee else None,
            "external_id": order.external_id,
            "external_request": row.delivery.status if row.delivery is not None else None,
            "created_at": iso(order.created_at), "acknowledged_at": iso(order.acknowledged_at),
            "closed_at": iso(order.closed_at), "closed_by": order.closed_by, "close_note": order.close_note}


def workflow_summary(entry, note: str | None) -> dict:
    """A workflow as a list shows it: where it stands, without its steps (GET /api/workflows/{id} has them)."""
    return {
        "id": entry.id, "name": entry.name, "tenant": entry.tenant.name, "status": entry.status,
        "idempotency_key": entry.idempotency_key, "current_step": entry.current_step,
        "failed_step": entry.failed_step, "note": note, "created_by": entry.created_by,
        "created_at": iso(entry.created_at), "updated_at": iso(entry.updated_at), "finished_at": iso(entry.finished_at),
    }


def workflow(detail) -> dict:
    """A workflow with its steps (index is the step's 1-based number) and where each one's run and undo stand."""
    entry = detail.workflow
    steps = [{"index": view.step.position, "handler": view.step.handler, "run_id": view.run.id if view.run else None,
              "status": view.status, "compensation_status": view.step.compensation_status,
              "compensation_attempts": view.undo_attempts, "note": view.step.note} for view in detail.steps]
    return {**workflow_summary(entry, detail.note), "steps": steps}
