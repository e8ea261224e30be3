"""GET /metrics for Prometheus: open, as exporters are, unless REBOUND_METRICS_TOKEN asks for a bearer token."""

import hmac

from flask import Blueprint, Response, current_app, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST

from console.auth import public
from console.domain.clock import utcnow
from console.services.system import observability

bp = Blueprint("metrics", __name__)


def _authorised() -> bool:
    expected = current_app.config.get("METRICS_TOKEN")
    if not expected:
        return True
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    # Compared in constant time, and as bytes so a non-ASCII header cannot raise.
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected.encode())


@bp.get("/metrics")
@public
def scrape():
    if not _authorised():
        response = jsonify(error="unauthorized", detail="send 'Authorization: Bearer <REBOUND_METRICS_TOKEN>'")
        response.status_code = 401
        response.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return Response(observability.exposition(utcnow()), mimetype=None, content_type=CONTENT_TYPE_LATEST)
