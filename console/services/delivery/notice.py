"""Turn an outbox row into what a person reads: a title, a one-line summary, facts and links back."""

from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from console.domain import deleted_names
from console.domain.words import agree, plural
from console.extensions import db
from console.models import OutboxMessage, Task, Tenant, WorkOrder
from console.services.settings import setting

DEAD_RULES = ("dead_letter", "retry_limit_reached")
SEVERITIES = ("critical", "error", "warning", "info")
SEVERITY = {"retry_limit_reached": "error", "dead_letter": "error", "breaker_opened": "error",
            "queue_overflow": "warning", "tenant_quota": "warning", "compensation_started": "warning",
            "sla_breach": "warning", "sla_consecutive_breaches": "critical", "delivery_failed": "error",
            "resolved": "info", "test": "info"}


@dataclass
class Notice:
    """One message, ready for any channel."""

    message_id: int
    kind: str
    route: str
    rule: str
    action: str  # trigger | resolve
    severity: str
    title: str
    summary: str
    incident_key: str
    occurrences: int
    at: datetime
    tenant: str | None
    component: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    details: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        """Return the plain-text line for notifications that show only one line."""
        return f"{self.title}: {self.summary}"

    @property
    def link(self) -> str | None:
        return self.links[0][1] if self.links else None


def incident_key(message: OutboxMessage) -> str:
    """Return the PagerDuty dedup key: one incident per work order for dead letters, else per outbox key."""
    payload = message.payload or {}
    if payload.get("incident_key"):
        return str(payload["incident_key"])
    if payload.get("rule") in DEAD_RULES and payload.get("work_order_id"):
        return work_order_incident(payload["work_order_id"])
    return f"rebound-{message.dedup_key}"


def work_order_incident(work_order_id: int) -> str:
    return f"rebound-workorder-{work_order_id}"


def console_url(path: str, **query) -> str:
    """Return an absolute link into the console (REBOUND_CONSOLE_URL)."""
    query = {key: value for key, value in query.items() if value not in (None, "")}
    return setting("CONSOLE_URL").rstrip("/") + path + (f"?{urlencode(query)}" if query else "")


def _seconds(value) -> str:
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        return str(value)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class _Facts:
    """Look up the names behind ids once per message."""

    def __init__(self, payload: dict):
        self.payload = payload
        tenant = db.session.get(Tenant, payload["tenant_id"]) if payload.get("tenant_id") else None
        self.tenant = tenant.name if tenant else None
        task = db.session.get(Task, payload["task_id"]) if payload.get("task_id") else None
        self.task = deleted_names.shown(task.name) if task else payload.get("task")
        order_id = payload.get("work_order_id")
        self.order = db.session.get(WorkOrder, order_id) if order_id else None


def build(message: OutboxMessage) -> Notice:
    """Describe an outbox row for people, in the same words on every channel."""
    payload = dict(message.payload or {})
    rule = payload.get("rule") or ("work_order" if message.kind == "workorder" else message.kind)
    if rule == "breaker_opened" and payload.get("scope") != "handler_and_tenant":
        # A handler-wide breaker is every tenant's; alerts queued before scopes existed named the tripping tenant.
        payload.pop("tenant_id", None)
    facts = _Facts(payload)
    title, summary = _words(message, rule, payload, facts)
    severity = payload.get("severity") if payload.get("severity") in SEVERITIES else SEVERITY.get(rule, "error")
    if message.channel == "manager" and severity != "critical":
        severity = "critical"  # escalations page the manager at high urgency
    notice = Notice(
        message_id=message.id, kind=message.kind, route=message.channel, rule=rule,
        action=message.kind if message.kind in ("resolve", "acknowledge") else "trigger", severity=severity,
        title=title,
        summary=summary[:1000], incident_key=incident_key(message), occurrences=message.occurrences,
        at=message.created_at, tenant=facts.tenant,
        component=payload.get("handler") or facts.task or "rebound",
        details={**payload, "occurrences": message.occurrences, "tenant": facts.tenant, "task_name": facts.task,
                 "work_order_dead_letters": facts.order.dead_letter_count if facts.order else None})
    notice.facts = _fact_lines(message, payload, facts)
    notice.links = _links(rule, payload, facts)
    return notice


def _dead_words(message: OutboxMessage, rule: str, payload: dict, facts: _Facts) -> tuple[str, str]:
    handler, code = payload.get("handler", "?"), payload.get("error_code") or "error"
    failed = (f"{payload['imported_from']} failed with {code} before Rebound (imported; a replay runs {handler})"
              if payload.get("imported_from") else f"{handler} failed with {code}")
    if payload.get("reopened"):  # a rollback opened discarded letters again, in a new work order
        return (f"Dead letters reopened: {handler} — {code}",
                f"{plural(int(payload['reopened']), 'dead letter')} reopened by the rollback of request "
                f"#{payload.get('approval_id')}: {failed}: {payload.get('message') or 'no message'}")
    total = facts.order.dead_letter_count if facts.order else message.occurrences
    group = (f"{plural(message.occurrences, 'more dead letter')} in this group ({total} in all)"
             if total > message.occurrences else f"{plural(message.occurrences, 'dead letter')} in this group")
    lead = "Retry limit reached" if rule == "retry_limit_reached" else "Dead letter"
    attempts = payload.get("attempts")
    after = f" after {plural(int(attempts), 'attempt')}" if attempts else ""
    return (f"{lead}: {payload.get('imported_from') or handler} — {code}",
            f"{group}: {failed}{after}: {payload.get('message') or 'no message'}")


def _words(message: OutboxMessage, rule: str, payload: dict, facts: _Facts) -> tuple[str, str]:
    if rule == "resolved":
        return (f"Resolved: {payload.get('title', 'alert')}", payload.get("summary") or "The cause has cleared.")
    if rule == "acknowledged":
        return f"Acknowledged: {payload.get('title', 'alert')}", payload.get("summary") or "Someone is on it."
    if payload.get("title") and payload.get("summary"):
        return str(payload["title"]), str(payload["summary"])
    if rule in DEAD_RULES:
        return _dead_words(message, rule, payload, facts)
    handler, tenant, task = payload.get("handler", "?"), facts.tenant or "?", facts.task or "?"
    times = f" ({message.occurrences} times)" if message.occurrences > 1 else ""
    if rule == "breaker_opened":
        return _breaker_words(handler, facts.tenant, payload, times)
    if rule == "queue_overflow":
        current = int(payload.get("current") or 0)
        return (f"Queue full: {handler} in {tenant}",
                f"{plural(current, 'run')} already {agree(current, 'waits', 'wait')} (limit {payload.get('max')}, "
                f"{payload.get('limit')}); new submissions are refused with 429{times}.")
    if rule == "tenant_quota":
        waiting = int(payload.get("waiting") or 0)
        return (f"Tenant quota reached: {tenant}",
                f"{plural(waiting, 'run')} {agree(waiting, 'waits', 'wait')} (max_queued {payload.get('max_queued')}); "
                f"scheduled firings queue up behind {agree(waiting, 'it', 'them')}{times}.")
    if rule == "compensation_started":
        return (f"Compensating: {handler}",
                f"Run #{payload.get('run_id')} failed with {payload.get('error_code')}: "
                f"{payload.get('message') or 'no message'}; its undo is running{times}.")
    if rule == "sla_breach":
        how = "started late" if payload.get("kind") == "start_delay" else "missed its deadline"
        return (f"SLA breach: {task}",
                f"Run #{payload.get('run_id')} of {task} {how} by {_seconds(payload.get('late_by_s'))} "
                f"(scheduled {payload.get('scheduled_for', '?')}){times}.")
    if rule == "sla_consecutive_breaches":
        count = payload.get("count", 3)
        return (f"SLA breached {count} runs in a row: {task}",
                f"The last {count} runs of {task} ({', '.join(f'#{r}' for r in payload.get('runs', []))}) all "
                "breached their SLA; escalated to the manager.")
    if rule == "delivery_failed":
        return _failed_words(message, payload)
    if rule == "test":
        return ("Test alert from Rebound",
                f"Sent by {payload.get('requested_by', 'an admin')} from Admin → Channels to check this channel. "
                "No action needed.")
    if message.kind == "workorder":
        return (f"Work order #{payload.get('work_order_id')}: {payload.get('title', '')}",
                f"{handler} failed with {payload.get('error_code')}: {payload.get('reason') or 'no message'}")
    words = str(payload.get("title") or rule.replace("_", " ").capitalize())
    summary = payload.get("summary") or ", ".join(
        f"{key}={value}" for key, value in payload.items() if key not in ("rule", "title") and value is not None)
    return words, f"{summary}{times}"


def _breaker_words(handler: str, tenant: str | None, payload: dict, times: str) -> tuple[str, str]:
    held, probe = _seconds(payload.get("open_s")), "then one probe call decides whether it closes"
    if tenant is None:
        return (f"Circuit breaker opened: {handler}",
                f"{handler} kept failing, so its calls are held for {held} for every tenant, {probe}{times}.")
    return (f"Circuit breaker opened: {handler} for {tenant}",
            f"{handler} kept failing for {tenant}, so {tenant}'s calls are held for {held}, {probe}; other "
            f"tenants' calls go on{times}.")


def _failed_words(message: OutboxMessage, payload: dict) -> tuple[str, str]:
    channels = ", ".join(payload.get("failed_channels") or []) or "its channels"
    attempts = plural(int(payload.get("attempts") or 0), "attempt")
    more = f" ({message.occurrences} messages so far)" if message.occurrences > 1 else ""
    if payload.get("failed_kind") == "workorder":
        return ("Work order creation failed",
                f"Work order #{payload.get('work_order_id')} ({payload.get('failed_title', '')}) could not be created "
                f"in the work-order system after {attempts}: {payload.get('error', '?')}{more}. It is open in "
                "Rebound; fix the channel, then send it again from the work order's page.")
    return ("Alert delivery failed",
            f"\"{payload.get('failed_title', 'an alert')}\" could not be delivered to {channels} after {attempts}: "
            f"{payload.get('error', '?')}{more}.")


def _fact_lines(message: OutboxMessage, payload: dict, facts: _Facts) -> list[tuple[str, str]]:
    lines = [("Tenant", facts.tenant), ("Handler", payload.get("handler")), ("Task", facts.task),
             ("Error code", payload.get("error_code")), ("Attempts", payload.get("attempts")),
             ("Occurrences", message.occurrences if message.occurrences > 1 else None),
             ("Work order", f"#{facts.order.id} ({facts.order.status})" if facts.order else None)]
    return [(label, str(value)) for label, value in lines if value not in (None, "")]


def _links(rule: str, payload: dict, facts: _Facts) -> list[tuple[str, str]]:
    links = []
    if facts.order is not None:
        links.append((f"Work order #{facts.order.id}", console_url(f"/workorders/{facts.order.id}")))
        if rule in DEAD_RULES:
            links.append(("Dead letters of this group", console_url("/dlq/", group=facts.order.fingerprint)))
    if payload.get("run_id"):
        links.append((f"Run #{payload['run_id']}", console_url(f"/runs/{payload['run_id']}")))
    if payload.get("task_id"):
        links.append((f"Task {facts.task or payload['task_id']}", console_url(f"/tasks/{payload['task_id']}")))
    if rule == "breaker_opened":
        links.append(("Breakers", console_url("/breakers")))
    if rule in ("queue_overflow", "tenant_quota"):
        links.append(("Queues", console_url("/queues")))
    if rule in ("delivery_failed", "workorder_failed", "test"):  # where a failed message is sent again
        links.append(("Channels", console_url("/admin/channels")))
    if rule in DEAD_RULES and not links:
        links.append(("Dead-letter queue", console_url("/dlq/")))
    return links or [("Overview", console_url("/overview"))]
