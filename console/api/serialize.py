"""JSON shapes of the API's objects (ISO 8601 times with offsets)."""

from console.models import Run, RunEvent


def iso(moment):
    return moment.isoformat() if moment else None


def event(entry: RunEvent) -> dict:
    return {"at": iso(entry.at), "kind": entry.kind, "from": entry.from_status, "to": entry.to_status,
            "attempt": entry.attempt, "series": entry.series, "retry_token": entry.retry_token,
            "reason": entry.reason, "error_code": entry.error_code, "message": entry.message,
            "next_retry_at": iso(entry.next_retry_at), "worker_id": entry.worker_id,
            "duration_ms": entry.duration_ms, "actor": entry.actor, "data": entry.data}


def run(entry: Run, events: list[RunEvent] | None = None) -> dict:
    body = {
        "id": entry.id, "status": entry.status, "status_reason": entry.status_reason,
        "tenant": entry.tenant.name, "task_id": entry.task_id, "handler": entry.handler,
        "idempotency_key": entry.idempotency_key, "attempt": entry.attempt, "series": entry.series,
        "policy": entry.policy.name if entry.policy else "default", "policy_version": entry.policy_version,
        "progress": {"percent": entry.progress, "message": entry.progress_message},
        "result": entry.result,
        "error": {"code": entry.error_code, "message": entry.error_message} if entry.error_code else None,
        "next_retry_at": iso(entry.next_retry_at), "scheduled_for": iso(entry.scheduled_for),
        "enqueued_at": iso(entry.enqueued_at), "created_at": iso(entry.created_at),
        "started_at": iso(entry.started_at), "finished_at": iso(entry.finished_at),
        "cancel_requested": entry.cancel_requested, "trace_id": entry.trace_id,
    }
    if events is not None:
        body["events"] = [event(e) for e in events]
    return body
