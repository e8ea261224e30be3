"""The generic alert webhook: JSON to {url}/notifications/<kind>, signed with HMAC-SHA256 over the raw body."""

import hashlib
import hmac

from console.services.delivery.http import Request, below, encode
from console.services.delivery.notice import Notice
from console.services.delivery.targets import Target

RETRY_ALERT = "/notifications/retry-alert"
SLA_BREACH = "/notifications/sla-breach"
SIGNATURE_HEADER = "X-Rebound-Signature"


def sign(secret: str, body: bytes) -> str:
    """Return the signature header's value: sha256=<hex HMAC of the body>."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def path(notice: Notice) -> str:
    # An SLA escalation (the manager channel) is an SLA alert too: a receiver of the breaches hears of it there.
    return SLA_BREACH if notice.route in ("sla-breach", "manager") else RETRY_ALERT


def document(notice: Notice) -> dict:
    """Return the webhook body for a notice."""
    return {
        "id": notice.message_id, "event": notice.rule, "kind": notice.kind, "action": notice.action,
        "severity": notice.severity, "title": notice.title, "summary": notice.summary, "tenant": notice.tenant,
        "occurrences": notice.occurrences, "dedup_key": notice.incident_key, "at": notice.at.isoformat(),
        "url": notice.link, "links": [{"href": url, "text": label} for label, url in notice.links],
        "details": notice.details,
    }


def request(notice: Notice, target: Target) -> Request:
    body = encode(document(notice))
    headers = {"X-Rebound-Event": notice.rule, "X-Rebound-Delivery": str(notice.message_id)}
    if target.secret:
        headers[SIGNATURE_HEADER] = sign(target.secret, body)
    return Request(below(target.url, path(notice)), body, headers)
