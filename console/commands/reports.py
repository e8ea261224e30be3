"""`rebound sla-report`: the report figures in a terminal, as CSV or JSON; `--rebuild` recomputes the rollups."""

import csv
import json
import sys

import click
from flask.cli import with_appcontext

from console.commands.output import table

COLUMNS = ["figure", "value", "of", "previous", "target", "met"]


@click.command("sla-report")
@click.option("--from", "first", default=None, help="First day (UTC), YYYY-MM-DD; with --to.")
@click.option("--to", "last", default=None, help="Last day (UTC), included.")
@click.option("--period", default=None, type=click.Choice(["24h", "7d", "30d", "90d"]),
              help="The last 24 h, 7 d, 30 d or 90 d up to now (default 7d) when no dates are given.")
@click.option("--tenant", default=None, help="Only this tenant.")
@click.option("--task", "task", default=None, help="Only this task (its id).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--rebuild", is_flag=True, help="First recompute every rollup from the runs.")
@with_appcontext
def sla_report_command(first, last, period, tenant, task, fmt, rebuild):
    """Print the report figures (on time, success, retries, duplicates, dead letters, alerts, SLA, conflicts)."""
    from console.domain.clock import utcnow
    from console.domain.figures import shown, target_text
    from console.services.errors import ServiceError
    from console.services.reports import figures, rollup
    from console.services.reports import scope as report_scope

    if rebuild:
        days = rollup.rebuild(progress=lambda day: click.echo(f"  rolled up {day:%Y-%m-%d}", err=True))
        click.echo(f"Rebuilt the rollups from the runs: {days} days.", err=True)
    now = utcnow()
    try:
        chosen = report_scope.period(period, first, last, now)
        scope = report_scope.resolve(tenant, task, None)
    except ServiceError as error:
        raise click.BadParameter(error.detail, param_hint=f"--{error.field}" if error.field else None) from None
    summary = figures.summary(chosen, scope, now)
    if fmt == "json":
        click.echo(json.dumps(summary.as_dict(), indent=2))
        return
    if fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(["name", "label", "value", "previous", "target", "met", "unit", "part", "whole"])
        for name, value in summary.values.items():
            part, whole, _ = value.basis or (None, None, None)
            writer.writerow([name, value.figure.label, _raw(value.value), _raw(value.previous),
                             _raw(value.figure.target), _raw(value.met), value.figure.unit, _raw(part), _raw(whole)])
        return
    as_of = f"{summary.as_of:%Y-%m-%d %H:%M:%S} UTC" if summary.as_of else "never (run --rebuild)"
    click.echo(f"{chosen.start:%Y-%m-%d %H:%M} – {chosen.end:%Y-%m-%d %H:%M} UTC, beside {chosen.previous_words}; "
               f"rollups computed up to {as_of}")
    table([{"figure": value.figure.label, "value": shown(value.figure, value.value),
            "of": f"{value.basis[0]:,} of {value.basis[1]:,} {value.basis[2]}" if value.basis else "",
            "previous": shown(value.figure, value.previous), "target": target_text(value.figure),
            "met": {True: "met", False: "NOT MET", None: ""}[value.met]} for value in summary.values.values()],
          COLUMNS)


def _raw(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


# The name MISSION.md (from seed 001's scripts/ops/task-sla-report) gives the tool: the same command under it.
task_sla_report_command = click.Command(
    "task-sla-report", params=sla_report_command.params, callback=sla_report_command.callback,
    help="The same as sla-report (the tool's name in the product's seed documents).")
