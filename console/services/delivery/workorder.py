"""The external work-order system: POST {url}/ops/workorders with the failure and its task context."""

from console.services.delivery import webhook
from console.services.delivery.http import Request, Result, below, encode
from console.services.delivery.notice import Notice, work_order_incident
from console.services.delivery.targets import Target

PATH = "/ops/workorders"


def document(notice: Notice) -> dict:
    """Return the work-order request for a notice (a real work order, or a channel test)."""
    details = notice.details
    test = notice.rule == "test"
    return {
        "source": "rebound",
        "test": test,
        "work_order_id": details.get("work_order_id"),
        "title": details.get("title") or notice.title,
        "summary": notice.summary,
        "tenant": notice.tenant,
        "handler": details.get("handler"),
        "task": {"id": details["task_id"], "name": details.get("task_name")} if details.get("task_id") else None,
        "failure": {"error_code": details.get("error_code"), "reason": details.get("reason"),
                    "first_run_id": details.get("first_run_id"),
                    "dead_letters": details.get("work_order_dead_letters")},
        "created_at": notice.at.isoformat(),
        "url": notice.link,
        "links": [{"href": url, "text": label} for label, url in notice.links],
    }


def request(notice: Notice, target: Target) -> Request:
    key = (f"rebound-test-{notice.message_id}" if notice.rule == "test"
           else work_order_incident(notice.details.get("work_order_id")))
    body = encode(document(notice))
    headers = {"Idempotency-Key": key}
    if target.secret:  # as the alert webhook signs: a work-order system reachable by others can tell Rebound's
        headers[webhook.SIGNATURE_HEADER] = webhook.sign(target.secret, body)
    return Request(below(target.url, PATH), body, headers)


def external_id(result: Result) -> str | None:
    """Return the id the work-order system gave the new ticket, if it said."""
    value = (result.data or {}).get("id")
    return str(value)[:120] if value not in (None, "") else None
