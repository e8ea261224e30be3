"""Alert rules over the API: read their state, and (admins) change thresholds, windows and switches."""

from flask import Blueprint, jsonify

from console.api.common import body, known_args
from console.auth import current_actor, requires, shared_by_all_tenants, tenant_scope
from console.services.errors import Forbidden
from console.services.people.permissions import ADMIN, VIEW
from console.services.system import alert_rules

bp = Blueprint("alert_rules_api", __name__)


@bp.get("/internal/alert-rules")
@requires(VIEW)
def list_rules():
    known_args(())
    if tenant_scope() is not None:
        raise Forbidden("alert rules watch every tenant; a token limited to one tenant may not read them")
    return jsonify([alert_rules.as_dict(row) for row in alert_rules.all_rules()])


@bp.put("/internal/alert-rules/<key>")
@requires(ADMIN)
@shared_by_all_tenants("Alert rules")
def put_rule(key: str):
    row = alert_rules.update_rule(key, body(), current_actor())
    return jsonify(alert_rules.as_dict(row))
