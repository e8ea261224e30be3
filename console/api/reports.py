"""Reports over the API: the figures of a period beside the previous one and the seeds' targets."""

from flask import Blueprint, jsonify, request

from console.api.common import known_args
from console.auth import requires, tenant_scope
from console.domain.clock import utcnow
from console.services.errors import InvalidInput
from console.services.people.permissions import REPORT
from console.services.reports import figures
from console.services.reports import scope as report_scope

bp = Blueprint("reports_api", __name__)


@bp.get("/api/reports/summary")
@requires(REPORT)
def summary():
    known_args(("period", "from", "to", "tenant", "task"))  # a mistyped tenant read every tenant's figures
    args, now = request.args, utcnow()
    if args.get("period") and (args.get("from") or args.get("to")):  # one would be dropped without a word
        raise InvalidInput("give a period (7d) or a from and to, not both", "period")
    period = report_scope.period(args.get("period"), args.get("from"), args.get("to"), now)
    scope = report_scope.resolve(args.get("tenant"), args.get("task"), tenant_scope())
    return jsonify(figures.summary(period, scope, now).as_dict())
