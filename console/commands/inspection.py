"""`rebound retry-inspect` and `rebound task-dryrun`: the seeds' tools for what waits and what will fire."""

import click
from flask.cli import with_appcontext

from console.commands.output import ROW_ID, table


def section(title: str, columns: list[str], rows: list[dict]) -> None:
    """Print a titled table, its rows indented under the title (or "(none)")."""
    click.echo(f"\n{title}")
    if not rows:
        click.echo("  (none)")
        return
    table(rows, columns, indent="  ")


@click.command("retry-inspect")
@click.option("--reconcile", is_flag=True, help="Repair drift between the database and Redis first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@with_appcontext
def retry_inspect_command(reconcile, as_json):
    """Show the delay queue and the dead-letter queue; --reconcile repairs state drift."""
    import json

    from console.services.engine import retry_inspect
    from console.services.engine.reconcile import reconcile as run_reconcile

    repaired = run_reconcile().as_dict() if reconcile else None
    data = retry_inspect.snapshot()
    if repaired is not None:
        data["reconciled"] = repaired
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    if repaired is not None:
        click.echo("Reconciled: " + ", ".join(f"{k} {v}" for k, v in repaired.items()))
    click.echo("Runs by status: " + (", ".join(f"{k} {v}" for k, v in sorted(data["runs_by_status"].items()))
                                     or "none"))
    section("Delay queue (retry_wait)", ["handler", "count", "next_retry_at"], data["delay_queue"])
    section("Dead-letter queue (open)", ["handler", "error_code", "count", "oldest_age"],
            _aged(data["dead_letter_queue"], "oldest_age_s"))
    section("Oldest retry-waiting runs", ["run_id", "handler", "attempt", "next_retry_at", "error_code"],
            data["oldest_retry_wait"])
    section("Oldest open dead letters", ["id", "run_id", "handler", "error_code", "age", "reason"],
            _aged(data["oldest_dead_letters"], "age_s"))


def _aged(rows: list[dict], key: str) -> list[dict]:
    """Say an age in seconds as a person reads it in the tables ("11 d 12 h", not 996900); --json keeps seconds."""
    from console.domain.figures import duration

    return [{**row, key.removesuffix("_s"): duration(row[key])} for row in rows]


def _a_number(value: float, option: str) -> float:
    """Refuse NaN, which every range check lets through (it compares false both ways)."""
    if value != value:
        raise click.BadParameter("nan is not a number of hours; give one such as 24", param_hint=option)
    return value


@click.command("task-dryrun")
@click.option("--hours", type=click.FloatRange(0, 24 * 366, min_open=True), default=24, show_default=True,
              callback=lambda context, param, value: _a_number(value, "--hours"), help="How far ahead to forecast.")
@click.option("--tenant", default=None, help="Only this tenant's tasks.")
@click.option("--task", "task_id", type=ROW_ID, default=None, help="Only this task (its id).")
@click.option("--crowded", type=click.IntRange(1, 100_000), default=50, show_default=True,
              help="Starts in one minute worth a warning.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@with_appcontext
def task_dryrun_command(hours, tenant, task_id, crowded, as_json):
    """Forecast firings; report mutex overlaps, quota and quota class overflows, window deferrals, crowded minutes."""
    import json

    from console.domain.clock import utcnow
    from console.services.errors import NotFound
    from console.services.people import tenants
    from console.services.scheduling import tasks, warnings
    from console.services.scheduling.forecast import MAX_FIRINGS_PER_TASK, forecast

    # A name or id that matches nothing forecast "0 cron tasks", read as a quiet schedule.
    if tenant and tenants.find(tenant) is None:
        raise click.BadParameter(f"no tenant named {tenant!r}", param_hint="--tenant")
    if task_id is not None:
        try:
            tasks.get(task_id)
        except NotFound as error:
            raise click.BadParameter(error.detail, param_hint="--task") from None
    now = utcnow()
    result = forecast(now, hours, tenant, task_id, crowded)
    # Kept, so the reports can tell how many of the conflicts that then happen were named beforehand.
    warnings.record(result, now)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
        return
    click.echo(f"{result.tasks} cron tasks, {result.firings} firings from {result.start:%Y-%m-%d %H:%M} "
               f"to {result.end:%Y-%m-%d %H:%M} UTC")
    if result.cut_short:
        section(f"Cut short: at most {MAX_FIRINGS_PER_TASK:,} firings a task are forecast; after 'until' these "
                "tasks' firings are not counted (ask for fewer --hours)", ["task", "firings", "until"],
                result.cut_short)
    section("Mutex overlaps", ["mutex_key", "first", "second", "overlap_s", "duration_basis", "consequence"],
            result.mutex_overlaps)
    section("Quota overflows", ["tenant", "minute", "expected_running", "max_running"], result.quota_overflows)
    section("Quota class overflows", ["quota_class", "minute", "expected_running", "max_running", "tasks"],
            result.class_overflows)
    section("Firings outside their window", ["task", "firing", "deferred_to"], result.outside_window)
    section(f"Minutes with {crowded}+ starts", ["minute", "starts"], result.crowded_minutes)
    section("Capacity reservations", ["id", "tenant", "running_slots", "queued_runs", "starts_at", "ends_at", "reason"],
            result.reservations)
