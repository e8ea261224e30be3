"""PagerDuty Events API v2: trigger an incident per dedup key, acknowledge it when someone takes it in Rebound, resolve
it when the cause clears."""

from urllib.parse import urlsplit

from console.services.delivery.http import Request, encode
from console.services.delivery.notice import Notice, console_url
from console.services.delivery.targets import Target


def document(notice: Notice, routing_key: str) -> dict:
    """Return the Events API v2 event for a notice."""
    if notice.action in ("resolve", "acknowledge"):
        return {"routing_key": routing_key, "event_action": notice.action, "dedup_key": notice.incident_key}
    return {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": notice.incident_key,
        "payload": {
            "summary": notice.text[:1024],
            "source": urlsplit(console_url("")).netloc or "rebound",
            "severity": notice.severity,
            "timestamp": notice.at.isoformat(),
            "component": notice.component,
            "group": notice.tenant or "rebound",
            "class": notice.rule,
            "custom_details": notice.details,
        },
        "links": [{"href": url, "text": label} for label, url in notice.links],
        "client": "Rebound",
        "client_url": console_url("/overview"),
    }


def request(notice: Notice, target: Target) -> Request:
    return Request(target.url, encode(document(notice, target.secret)))
