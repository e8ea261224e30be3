"""Tasks: the list, the conflict forecast, and one task's page with its schedule, definition and runs."""

from flask import abort, render_template, request

from console.auth import requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import db
from console.models import Tenant
from console.redis_conn import get_redis
from console.services import inputs
from console.services.people import tenants
from console.services.people.permissions import VIEW
from console.services.reports import breaches as breach_list
from console.services.runs import query as run_query
from console.services.runs.waiting import breaker_resets
from console.services.scheduling import sla, task_query, tasks, template_insight
from console.services.scheduling.forecast import forecast as forecast_firings
from console.services.system import leader
from console.web import paging
from console.web.render import page
from console.web.tasks.blueprint import bp

RECENT_RUNS = 20
FILTERS = ("tenant", "handler", "status", "q")


@bp.get("", strict_slashes=False)
@requires(VIEW)
def index():
    scope = tenant_scope()
    filters = {key: request.args.get(key, "").strip() for key in FILTERS}
    if scope is not None:
        tenants.keep_within(filters["tenant"], scope, "tasks")  # refused, as on Runs and the DLQ (helper 99)
        filters["tenant"] = ""
    before, now = paging.before(), utcnow()
    rows, next_id = task_query.page(scope=scope, tenant=filters["tenant"], handler=filters["handler"],
                                    status=filters["status"], text=filters["q"], before=before, now=now)
    return page("tasks/index.html", "results", rows=rows, next_id=next_id, filters=filters, now=now, paging=before,
                no_scheduler=leader.nobody_leads(get_redis()),
                query={key: value for key, value in filters.items() if value},
                tenant_names=[] if scope is not None else [t.name for t in tenants.all_tenants()],
                handler_names=task_query.handler_names(scope),
                resets=breaker_resets(row.last_run for row in rows if row.last_run))


HORIZONS = {"24h": 24, "7d": 168}
SHOWN_ROWS = 50


@bp.get("/forecast")
@requires(VIEW)
def forecast():
    """Forecast the scheduled tasks' firings (24 h or 7 d) and list the conflicts they will meet."""
    scope, now = tenant_scope(), utcnow()
    horizon = request.args.get("horizon", "24h")
    tenant = request.args.get("tenant", "").strip()
    if horizon not in HORIZONS:
        abort(422, "horizon is 24h or 7d")
    typed = request.args.get("crowded", "50").strip()
    crowded = int(typed) if inputs.is_digits(typed) and len(typed) <= 6 else 0
    # Said beside its box, the forecast shown at the default: "abc" read as 50 unsaid, 0 was a bare error page.
    crowded_error = None if 1 <= crowded <= 100_000 else "Crowded at is a whole number from 1 to 100,000"
    if scope is not None:
        tenants.keep_within(tenant, scope, "tasks")  # another tenant's name is refused, as everywhere, not ignored
        tenant = db.session.get(Tenant, scope).name  # a tenant-limited person forecasts their tenant only
    elif tenant and tenants.find(tenant) is None:
        abort(404, f"no tenant named {tenant!r}")
    # A GET writes nothing: `rebound task-dryrun` is what keeps forecasts for the reports' "named" figure.
    if crowded_error:
        crowded = 50
    result = forecast_firings(now, HORIZONS[horizon], tenant or None, crowded_threshold=crowded)
    return render_template("tasks/forecast.html", result=result, horizon=horizon, tenant=tenant, crowded=crowded,
                           typed_crowded=typed, crowded_error=crowded_error, overlaps=_pairs(result.mutex_overlaps),
                           shown=SHOWN_ROWS, tenant_names=[] if scope is not None else
                           [t.name for t in tenants.all_tenants()]), 422 if crowded_error else 200


def _pairs(overlaps: list[dict]) -> list[dict]:
    """Fold the overlaps of the same two tasks into one row: how often, the first time, the longest overlap."""
    pairs: dict[tuple, dict] = {}
    for overlap in overlaps:
        first, first_at = overlap["first"].rsplit(" at ", 1)
        second, second_at = overlap["second"].rsplit(" at ", 1)
        key = (overlap["mutex_key"], first, second, overlap["consequence"])
        pair = pairs.setdefault(key, {"mutex_key": key[0], "first": first, "second": second, "times": 0,
                                      "first_at": first_at, "second_at": second_at, "overlap_s": 0,
                                      "basis": overlap["duration_basis"], "consequence": key[3],
                                      "same_task": overlap["same_task"]})
        pair["times"] += 1
        pair["overlap_s"] = max(pair["overlap_s"], overlap["overlap_s"])
    return list(pairs.values())


@bp.get("/<int:task_id>")
@requires(VIEW)
def show(task_id: int):
    return task_page(tasks.get(task_id, tenant_scope()))


def task_page(task, status: int = 200, **event_form):
    """The task page; `event_form` keeps what a person typed into Post event, with its error."""
    now = utcnow()
    return render_template("tasks/show.html", task=task, now=now, firings=task_query.next_firings(task, now),
                           window_opens=task_query.window_opens(task, now),
                           rules={source.rule: source for source in template_insight.sources(task)},
                           template_name=template_insight.template_name(task), event_form=event_form,
                           listeners=task_query.listeners(task), sla=sla.in_force(task),
                           no_scheduler=task.cron and leader.nobody_leads(get_redis()),
                           **runs_panel(task)), status



def runs_panel(task) -> dict:
    """What the recent-runs panel shows: the runs and their SLA breaches."""
    runs = tasks.recent_runs(task, RECENT_RUNS)
    return {"runs": runs, "resets": breaker_resets(runs), "breaches": breach_list.of_task(task.id, utcnow()),
            "run_breaches": breach_list.of_runs([run.id for run in runs]),
            "series_starts": run_query.series_starts(runs)}


@bp.get("/cron-preview")
@requires(VIEW)
def cron_preview():
    preview = task_query.preview(request.args.get("cron", ""), request.args.get("timezone", ""), utcnow())
    return render_template("tasks/_cron_preview.html", preview=preview)
