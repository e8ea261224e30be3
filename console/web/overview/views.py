"""The Overview page: what needs attention right now."""

from datetime import timedelta

from flask import Blueprint, redirect, request, url_for

from console.auth import public, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import db, htmx
from console.models import Tenant
from console.models.runs import RARE
from console.redis_conn import get_redis
from console.services.people.permissions import VIEW
from console.services.reports import overview
from console.services.system import alert_rules, leader
from console.web.overview.charts import HISTORY_LABELS, failures_figure, failures_in_words, history_figure
from console.web.render import page
from console.web.runs.forms import TIME_FORMATS

bp = Blueprint("overview", __name__)
RUN_TIME = TIME_FORMATS[0]  # how the Runs page reads times in its query string


@bp.get("/")
@public
def root():
    return redirect(url_for("overview.index"))


@bp.get("/overview")
@requires(VIEW)
def index():
    scope, now = tenant_scope(), utcnow()
    window = request.args.get("history", "24h") if request.args.get("history") in overview.HISTORY else "24h"
    history, history_rows = None, []
    if not htmx:  # the live region refreshes every 5 s; the history (rollups, a minute behind) once per page
        per_hour = overview.history(window, scope)
        links = [_runs_of_hour(row["hour"], scope) for row in per_hour]
        history = history_figure(per_hour, links)
        # The chart's text alternative: the hours with any run, each opening its runs as its bar does.
        history_rows = [(row, link) for row, link in zip(per_hour, links, strict=True)
                        if any(row[kind] for kind in HISTORY_LABELS)]
    per_minute = overview.failures_per_minute(scope)
    breakers_open = overview.breakers_open(scope)
    # None: Redis did not answer just now, so the leader is not asked too (a frozen Redis costs one timeout, not two).
    no_scheduler = breakers_open is not None and leader.nobody_leads(get_redis())
    return page("overview/index.html", "live", counters=overview.counters(scope),
                dead_letters=overview.recent_dead_letters(scope), breakers_open=breakers_open,
                sla_today=overview.sla_breaches_today(scope),
                failures_figure=failures_figure(per_minute), failures_said=failures_in_words(per_minute),
                history_figure=history, history_rows=history_rows, history_labels=HISTORY_LABELS,
                window=window, windows=list(overview.HISTORY), links=_links(scope, now),
                alerts=[(row, alert_rules.spec(row)) for row in alert_rules.firing()], alert_looks=ALERT_LOOKS,
                scoped=scope is not None, now=now,
                no_scheduler=no_scheduler)


def _tenant_name(scope: int | None) -> str | None:
    return db.session.get(Tenant, scope).name if scope is not None else None


def _runs_of_hour(hour, scope: int | None) -> str:
    return url_for("runs.index", tenant=_tenant_name(scope), created_from=hour.strftime(RUN_TIME),
                   created_to=(hour + timedelta(hours=1)).strftime(RUN_TIME))


# Where a firing alert is looked into: the link (of _links) and its words. Without one, people guessed which counter
# was the next click (helper 142).
ALERT_LOOKS = {
    "retry_failure_rate": ("failing", "runs retrying"), "dlq_length": ("dead_open", "dead letters"),
    "retry_limit_reached": ("dead_open", "dead letters"), "breaker_opened": ("breakers_open", "breakers"),
    "queue_wait": ("queues", "queues & workers"), "queue_overflow": ("queues", "queues & workers"),
    "lock_contention": ("queues", "queues & workers"), "progress_write_failure_rate": ("queues", "queues & workers"),
    "scheduling_failure_rate": ("breaches", "late starts"), "sla_consecutive_breaches": ("breaches", "SLA breaches"),
    "workorder_failed": ("workorders", "work orders"), "timeout_anomaly": ("timeouts", "runs that timed out"),
}


def _links(scope: int | None, now) -> dict[str, str]:
    """Where each counter leads: the runs, dead letters or breaches it counts."""
    tenant, since = _tenant_name(scope), (now - timedelta(hours=24)).strftime(RUN_TIME)

    def runs(*statuses, **extra):
        return url_for("runs.index", status=list(statuses), tenant=tenant, **extra)

    return {"pending": runs("pending"), "running": runs("running"), "retry_wait": runs("retry_wait"),
            "dead_open": url_for("dlq.index"), "breakers_open": url_for("breakers.index"),
            "queues": url_for("queues.index"), "breaches": url_for("reports.breaches"),
            "timeouts": runs(error_code="timeout", ended_from=since), "workorders": url_for("workorders.index"),
            "sla_today": url_for("reports.breaches", **{"from": f"{now:%Y-%m-%d}", "to": f"{now:%Y-%m-%d}"}),
            "succeeded_24h": runs("succeeded", ended_from=since),
            # Runs retrying after a failed attempt: with dead and failed it listed runs dead for weeks, their letters
            # handled long ago (helper 110); the dead ones still open are the dead letters' list below.
            "failing": runs("retry_wait"),
            "success_rate_24h": runs(*RARE, ended_from=since)}
