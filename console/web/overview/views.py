"""The Overview page: what needs attention right now."""

from flask import Blueprint, redirect, url_for

from console.auth import public, requires, tenant_scope
from console.services.people.permissions import VIEW
from console.services.reports import overview
from console.web.overview.charts import failures_figure
from console.web.render import page

bp = Blueprint("overview", __name__)


@bp.get("/")
@public
def root():
    return redirect(url_for("overview.index"))


@bp.get("/overview")
@requires(VIEW)
def index():
    scope = tenant_scope()
    return page("overview/index.html", "live", counters=overview.counters(scope),
                dead_letters=overview.recent_dead_letters(scope), breakers_open=overview.breakers_open(),
                sla_today=overview.sla_breaches_today(scope),
                failures_figure=failures_figure(overview.failures_per_minute(scope)))
