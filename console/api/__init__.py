"""The JSON API for other services; bearer tokens, no cookies, so no CSRF."""

from flask import Blueprint, g, jsonify, request
from flask_login import current_user

from console.api import serialize
from console.auth import public, requires
from console.extensions import csrf
from console.redis_conn import get_redis
from console.services.errors import InvalidInput
from console.services.people.permissions import VIEW
from console.services.system import health

bp = Blueprint("api", __name__)


@bp.get("/healthz")
@public
def healthz():
    report = health.check(get_redis())
    return jsonify(report), 200 if report["status"] == "ok" else 503


@bp.get("/api/me")
@requires(VIEW)
def me():
    """Tell a service whom its token acts as."""
    token = g.api_token
    return jsonify(username=current_user.username, role=current_user.role, token=token.prefix,
                   tenant=token.tenant.name if token.tenant else None, expires_at=serialize.iso(token.expires_at))


def register(app) -> None:
    """Register the API blueprints, exempt from CSRF (they take bearer tokens only)."""
    from console.api.alert_rules import bp as alert_rules
    from console.api.approvals import bp as approvals
    from console.api.capacity import bp as capacity
    from console.api.dead_letters import bp as dead_letters
    from console.api.internal import bp as internal
    from console.api.metrics import bp as metrics
    from console.api.openapi import bp as openapi
    from console.api.quota_classes import bp as quota_classes
    from console.api.reports import bp as reports
    from console.api.runbooks import bp as runbooks
    from console.api.runs import bp as runs
    from console.api.tasks import bp as tasks
    from console.api.templates import bp as templates
    from console.api.tenants import bp as tenants
    from console.api.work_orders import bp as work_orders
    from console.api.worker import bp as worker
    from console.api.workflows import bp as workflows

    for blueprint in (bp, worker, internal, tasks, dead_letters, openapi, alert_rules, metrics, approvals, capacity,
                      workflows, runbooks, reports, tenants, templates, quota_classes, runs, work_orders):
        csrf.exempt(blueprint)
        app.register_blueprint(blueprint)
        API_BLUEPRINTS.add(blueprint.name)
    app.before_request(no_query_on_writes)


API_BLUEPRINTS: set[str] = set()


def no_query_on_writes() -> None:
    """Refuse an API write's query string: every write reads its body only, and POST /worker/tasks?tenant=globex made
    the run in the default tenant, unsaid (helper 152). A 422 naming the first, as a list refuses one it does not
    take."""
    if request.blueprint not in API_BLUEPRINTS or request.method in ("GET", "HEAD", "OPTIONS") or not request.args:
        return
    name = sorted(request.args)[0]
    raise InvalidInput(f"{request.method} {request.path} takes no query parameters (got {name[:64]!r}): send what "
                       "it needs in the JSON body", name[:64])
