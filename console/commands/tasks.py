"""`rebound tasks …`: list scheduled tasks, pause or resume one, run one now (audited as `cli`), from a terminal."""

import json

import click
from flask.cli import with_appcontext

from console.commands.output import ROW_ID, refused, table
from console.commands.terminal import cli_actor

COLUMNS = ["id", "tenant", "name", "cron", "timezone", "paused", "next_firing", "starts", "last_run", "last_status"]


@click.group("tasks")
def tasks_group():
    """List scheduled tasks; pause, resume or run one now."""


@tasks_group.command("list")
@click.option("--tenant", default="", help="Only this tenant's tasks.")
@click.option("--paused", is_flag=True, help="Only paused tasks.")
@click.option("--active", is_flag=True, help="Only tasks that are not paused.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=200, show_default=True, help="At most this many.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def list_command(tenant, paused, active, limit, as_json):
    """List live tasks, newest first, with their next firing (UTC; `starts`: when its window lets it start) and last
    run."""
    from console.domain.clock import utcnow
    from console.services.people import tenants
    from console.services.scheduling import task_query

    if paused and active:  # the last given won without a word (helper 139)
        raise click.UsageError("give --paused or --active, not both (neither lists every task)")
    status = "paused" if paused else "active" if active else None
    if tenant and tenants.find(tenant) is None:
        raise click.BadParameter(f"no tenant named {tenant!r}", param_hint="--tenant")
    rows, _ = task_query.page(tenant=tenant, status=status or "", now=utcnow(), limit=limit)
    found = [{"id": row.task.id, "tenant": row.task.tenant.name, "name": row.task.name, "cron": row.task.cron,
              "timezone": row.task.timezone, "paused": row.task.paused,
              "next_firing": row.next_firing.isoformat() if row.next_firing and not row.task.paused else None,
              # Its execution window holds that firing until it opens, as the Tasks page says "starts …".
              "starts": row.starts_at.isoformat() if row.starts_at and not row.task.paused else None,
              "last_run": row.last_run.id if row.last_run else None,
              "last_status": row.last_run.status if row.last_run else None} for row in rows]
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    table(found, COLUMNS)


def _task(task_id: int):
    from console.services.errors import NotFound
    from console.services.scheduling import tasks

    try:
        return tasks.get(task_id)
    except NotFound as error:
        raise click.BadParameter(error.detail, param_hint="TASK_ID") from None


@tasks_group.command("pause")
@click.argument("task_id", type=ROW_ID)
@with_appcontext
def pause_command(task_id):
    """Pause a task: its cron and events stop firing it until it is resumed."""
    _set_paused(task_id, True)


@tasks_group.command("resume")
@click.argument("task_id", type=ROW_ID)
@with_appcontext
def resume_command(task_id):
    """Resume a paused task."""
    _set_paused(task_id, False)


def _set_paused(task_id: int, paused: bool) -> None:
    from console.services.scheduling import tasks

    task = _task(task_id)
    was = task.paused
    tasks.set_paused(task, paused, cli_actor())
    verb = "paused" if paused else "resumed"
    click.echo(f"Task #{task.id} {task.tenant.name}/{task.name} " + (f"was {verb} already." if was == paused
                                                                      else f"{verb}."))


@tasks_group.command("trigger")
@click.argument("task_id", type=ROW_ID)
@click.option("--outside-window", is_flag=True, help="Start now even outside the task's execution window.")
@with_appcontext
def trigger_command(task_id, outside_window):
    """Run a task once, now, as the console's Run now does."""
    from console.extensions import db
    from console.services.errors import ServiceError
    from console.services.scheduling import on_demand

    task = _task(task_id)
    try:
        outcome = on_demand.run_now(task, cli_actor(), outside_window=outside_window)
    except ServiceError as error:
        db.session.rollback()
        raise refused(error) from None
    said = f" ({on_demand.REASONS.get(outcome.reason, outcome.reason)})" if outcome.reason else ""
    click.echo(f"Task #{task.id} {task.tenant.name}/{task.name}: run #{outcome.run_id} {outcome.status}{said}."
               if outcome.run_id else f"Task #{task.id} {task.tenant.name}/{task.name}: {outcome.status}{said}.")
