"""Reports for managers: the figures with targets and trends, charts, breaches, and every table as CSV."""

from flask import Blueprint, Response, render_template, request, url_for

from console.auth import requires, tenant_scope
from console.domain.clock import utcnow
from console.domain.figures import BY_NAME, HEADLINE, duration, shown, target_text
from console.domain.periods import DEFAULT, PRESETS
from console.extensions import db
from console.models import Tenant
from console.services.errors import InvalidInput, ServiceError
from console.services.people.permissions import REPORT, VIEW
from console.services.reports import breaches as breach_list
from console.services.reports import page as report_page
from console.services.reports import scope as report_scope
from console.services.runs import query as runs_query
from console.web import paging
from console.web.render import page
from console.web.reports import charts, exports
from console.web.reports.links import Links

bp = Blueprint("reports", __name__, url_prefix="/reports")
# since/until: a span of UTC minutes, what a chart point opens (its hour or day); not in the form, so Show drops it.
FILTERS = ("period", "from", "to", "since", "until", "tenant", "task")
# The cards in the order a manager reads them: scheduling, execution, recovery, alerting, planning.
CARDS = ("on_time_rate", "trigger_delay_p50_s", "trigger_delay_p95_s", "trigger_delay_p99_s",
         "execution_success_rate", "retry_success_rate", "duplicate_rate", "sla_breaches",
         "dead_letters_created", "dead_letters_recovered", "dead_letters_open", "recovery_time_p50_s",
         "recovery_time_p90_s", "alert_latency_p50_s", "alert_latency_p95_s", "workorder_completion_rate",
         "conflict_warning_hit_rate")


def _query() -> dict:
    """The page's filters as given, empty ones left out (for links, exports and the form)."""
    return {name: request.args.get(name, "").strip() for name in FILTERS if request.args.get(name, "").strip()}


def _selection():
    """Return (period, scope, links) of the request, or raise a ServiceError saying what to fix."""
    now, query = utcnow(), _query()
    for name in FILTERS:
        given = [value for value in request.args.getlist(name) if value.strip()]
        if len(set(given)) > 1:  # the first was read and the others dropped: a report of less than was asked
            raise InvalidInput(f"give one {name}, not {len(given)} ({', '.join(value[:20] for value in given[:3])}"
                               f"{', …' if len(given) > 3 else ''}): a report covers one", name)
    period = report_scope.period(query.get("period"), query.get("from"), query.get("to"), now, query.get("since"),
                                 query.get("until"))
    scope = report_scope.resolve(query.get("tenant"), query.get("task"), tenant_scope())
    tenant = db.session.get(Tenant, scope.tenant_id).name if scope.tenant_id is not None else None
    return period, scope, Links(period, scope, tenant, query), now


def _choices() -> dict:
    wall = tenant_scope()
    tenants = runs_query.tenant_options(wall)
    # The chosen tenant's tasks (picked with another tenant's, a task is refused); else every tenant's in the wall.
    chosen = next((tenant.id for tenant in tenants if tenant.name == _query().get("tenant")), wall)
    return {"tenants": tenants, "tasks": runs_query.task_options(chosen, asked=_query().get("task") or ""),
            "scoped": wall is not None}


def _presets(query: dict) -> tuple[dict[str, str], str | None]:
    """Return a link per preset period (keeping the other filters) and the preset shown, if any."""
    spans = ("from", "to", "since", "until")
    kept = {key: value for key, value in request.args.items() if key not in ("period", "before", *spans)}
    current = None if any(query.get(name) for name in spans) else query.get("period", DEFAULT)
    # A period that is no preset is said beside the presets, and is not sent again by the form's hidden field.
    current = current if current in PRESETS else None
    return {name: url_for(request.endpoint, **kept, period=name) for name in PRESETS}, current


def _page(template: str, block: str, status: int = 200, **context):
    query = _query()
    preset_links, current = _presets(query)
    return page(template, block, query=query, shown=shown, target_text=target_text, duration=duration,
                by_name=BY_NAME, preset_links=preset_links, current_preset=current, **_choices(),
                **context), status


@bp.get("", strict_slashes=False)
@requires(REPORT)
def index():
    try:
        period, scope, links, now = _selection()
    except ServiceError as error:
        return _page("reports/index.html", "report", error.status, error=error, report=None)
    report = report_page.build(period, scope, now)
    hourly = period.hourly
    buckets = list(report.trend)
    named = [name for name in CARDS if name != "dead_letters_open"]
    # Each point's value and link, drawn in its chart and listed in the table beside it (what a keyboard or a
    # screen reader reaches: Plotly's points are neither).
    points = {name: list(zip(buckets, [report.trend[bucket][name] for bucket in buckets],
                             links.buckets(name, buckets, hourly), strict=True)) for name in named}
    trends = {name: charts.trend(BY_NAME[name], {bucket: value for bucket, value, _ in points[name]},
                                 [link for _, _, link in points[name]], hourly) for name in named}
    failing = [row for row in report.tasks if row.failed][:15]
    heat_links = [links.heat_cells(row) for row in report.heat.tasks]  # the chart's and the table's, read once
    return _page("reports/index.html", "report", report=report, links=links, cards=CARDS, headline=HEADLINE,
                 trends=trends, points=points, error=None, covers=report_scope.describe(scope),
                 to_come=period.end - now,
                 heat_figure=charts.heat_map(report.heat, heat_links), heat_links=heat_links,
                 failing=failing,
                 failing_figure=charts.failing_tasks(failing, [links.row_runs(row) for row in failing]),
                 errors_figure=charts.error_groups(report.errors, [links.dlq_created(group=group.fingerprint)
                                                                   for group in report.errors]))


@bp.get("/breaches")
@requires(VIEW)  # which runs were late is an operator's business too: the Overview's "SLA breaches today" opens it
def breaches():
    kind = request.args.get("kind", "")
    try:
        period, scope, links, _ = _selection()
        hour = breach_list.hour_of_day(request.args.get("hour"))
        kind = breach_list.kind_of(kind)  # "bogus" listed both kinds as if asked for
    except ServiceError as error:
        return _page("reports/breaches.html", "breaches", error.status, error=error, rows=[], kind=kind, hour=None,
                     kinds=breach_list.KINDS)
    filters = breach_list.Filters(period.start, period.end, scope.tenant_id, scope.task_id, kind, hour)
    rows, older = breach_list.page(filters, paging.before())
    return _page("reports/breaches.html", "breaches", error=None, rows=rows, older=older, kind=kind, hour=hour,
                 kinds=breach_list.KINDS, period=period, links=links, total=breach_list.count(filters),
                 newer=request.args.get("before") is not None)


@bp.get("/breaches.csv")
@requires(VIEW)  # the breaches list is every role's to read, so is its download
def breaches_export():
    return _export("breaches")


@bp.get("/<table>.csv")
@requires(REPORT)
def export(table: str):
    return _export(table)


def _export(table: str):
    if table not in exports.TABLES:
        return render_template("error.html", status=404, detail=f"no table {table!r} to export; "
                               f"try one of {', '.join(exports.TABLES)}"), 404
    try:
        period, scope, _, now = _selection()
        hour = breach_list.hour_of_day(request.args.get("hour"))
        kind = breach_list.kind_of(request.args.get("kind"))
    except ServiceError as error:  # a download says what to fix in words, not in a saved file or an HTML page
        return Response(f"{error.detail}\n", error.status, mimetype="text/plain")
    return exports.respond(table, period, scope, now, {"kind": kind, "hour": hour})
