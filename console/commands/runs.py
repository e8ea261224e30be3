"""`rebound runs …`: list runs as the Runs page filters them, and show one with its timeline, from a terminal."""

import json

import click
from flask.cli import with_appcontext

from console.commands.output import ROW_ID, table
from console.domain.statuses import RunStatus

COLUMNS = ["id", "tenant", "task", "handler", "status", "attempt", "error_code", "created_at", "finished_at"]
EVENT_COLUMNS = ["at", "kind", "move", "attempt", "series", "why", "actor", "message"]
STATUSES = tuple(status.value for status in RunStatus)


@click.group("runs")
def runs_group():
    """List runs; show one with its timeline."""


def _statuses(_context, _param, value: str) -> tuple[str, ...]:
    statuses = tuple(s for s in value.replace(" ", "").split(",") if s)
    wrong = [s for s in statuses if s not in STATUSES]
    if wrong:
        raise click.BadParameter(f"{wrong[0][:40]!r} is none of {', '.join(STATUSES)} (several: comma-separated)")
    return statuses


@runs_group.command("list")
@click.option("--tenant", default="", help="Only this tenant's runs.")
@click.option("--task", "task_id", type=ROW_ID, default=None, help="Only this task's runs (its id).")
@click.option("--status", default="", callback=_statuses, help="Only runs in these statuses (dead,retry_wait).")
@click.option("--code", "error_code", default="", help="Only runs that failed with this error code.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="At most this many.")
@click.option("--before", type=ROW_ID, default=None, help="Older than this run: the next_before a list printed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, as GET /api/runs answers: {runs, next_before}.")
@with_appcontext
def list_command(tenant, task_id, status, error_code, limit, before, as_json):
    """List runs, newest first (times in UTC)."""
    from console.api import serialize
    from console.services.people import tenants
    from console.services.runs import query as run_query
    from console.services.scheduling import task_query

    found_tenant = tenants.find(tenant) if tenant else None
    if tenant and found_tenant is None:
        raise click.BadParameter(f"no tenant named {tenant!r}", param_hint="--tenant")
    if task_id is not None and not task_query.can_see(task_id, None):  # an empty table read as "it never ran"
        raise click.BadParameter(f"no task with id {task_id}", param_hint="--task")
    filters = run_query.RunFilters(tenant_id=found_tenant.id if found_tenant else None, task_id=task_id,
                                   statuses=status, error_code=error_code)
    found = run_query.page(filters, scope=None, before=before, limit=limit)
    if as_json:
        click.echo(json.dumps({"runs": [serialize.run_summary(run) for run in found.runs],
                               "next_before": found.next_before}, indent=2))
        return
    table([{"id": run.id, "tenant": run.tenant.name, "task": run.task.name if run.task else "", "handler": run.handler,
            "status": run.status, "attempt": run.attempt, "error_code": run.error_code,
            "created_at": f"{run.created_at:%Y-%m-%d %H:%M:%S}",
            "finished_at": f"{run.finished_at:%Y-%m-%d %H:%M:%S}" if run.finished_at else None}
           for run in found.runs], COLUMNS)
    if found.next_before:
        click.echo(f"older runs: --before {found.next_before}")


@runs_group.command("show")
@click.argument("run_id", type=ROW_ID)
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: the run as the API shows it, with its params, timeline and dead letters.")
@with_appcontext
def show_command(run_id, as_json):
    """Show a run: its state, error, dead letters and timeline (secret-named params masked)."""
    from console.api import serialize
    from console.services.errors import NotFound
    from console.services.runs import query as run_query

    try:
        detail = run_query.detail(run_id, scope=None)
    except NotFound as error:
        raise click.BadParameter(error.detail, param_hint="RUN_ID") from None
    run = detail.run
    if as_json:
        click.echo(json.dumps({**serialize.run(run, detail.events), "params": serialize.params(run.params),
                               "dead_letters": [serialize.dead_letter(letter) for letter in detail.dead_letters]},
                              indent=2))
        return
    task = f" · task #{run.task_id} {run.task.name}" if run.task else ""
    click.echo(f"Run #{run.id} · {run.tenant.name}{task} · {run.handler}")
    reason = f" ({run.status_reason})" if run.status_reason else ""
    click.echo(f"status: {run.status}{reason} · attempt {run.attempt} · series {run.series}")
    # A later series' own start, as the Runs page shows it: started_at stays series 1's, and beside the latest
    # series' end it read as one six-minute run (helper 128).
    started = ("started", run.started_at) if run.series == 1 else (f"series {run.series} started",
                                                                    detail.series_started_at)
    click.echo("times: " + " · ".join(f"{name} {moment:%Y-%m-%d %H:%M:%S}" for name, moment in (
        ("created", run.created_at), started, ("finished", run.finished_at),
        ("next retry", run.next_retry_at)) if moment))
    click.echo(f"params: {_clipped(json.dumps(serialize.params(run.params)), 500)}")
    if run.error_code:
        click.echo(f"error: {run.error_code}: {run.error_message or ''}")
    if detail.dead_letters:
        click.echo("dead letters: " + ", ".join(
            f"#{letter.id} {letter.status}" + (f" (work order #{letter.work_order_id})" if letter.work_order_id else "")
            for letter in detail.dead_letters))
    hidden = f", the oldest {detail.hidden_events} not shown" if detail.hidden_events else ""
    click.echo(f"timeline (UTC, oldest first{hidden}):")
    table([{"at": f"{event.at:%Y-%m-%d %H:%M:%S}", "kind": event.kind,
            "move": f"{event.from_status or '·'} → {event.to_status}" if event.to_status else None,
            "attempt": event.attempt, "series": event.series, "why": event.error_code or event.reason,
            "actor": event.actor, "message": _clipped(event.message or "", 100)} for event in detail.events],
          EVENT_COLUMNS, indent="  ")


def _clipped(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"
