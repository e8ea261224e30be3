"""`rebound templates list|show NAME`: conflict templates (named planner rules tasks reference), read-only."""

import json

import click
from flask.cli import with_appcontext

from console.commands.output import refused, table

COLUMNS = ["name", "version", "tasks", "updated_by", "updated_at", "description"]
SHOWN_TASKS = 20


@click.group("templates")
def templates_group():
    """Conflict templates: list them, show one with its rules and the tasks that reference it."""


@templates_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def list_command(as_json):
    """List every template with its version in force and how many live tasks reference it."""
    from console.services.scheduling import template_insight, templates

    rows = [{**templates.as_dict(row.record), "tasks": row.tasks} for row in template_insight.overview(None)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif not rows:
        click.echo("no conflict templates")
    else:
        table([{**row, "updated_at": row["updated_at"][:19]} for row in rows], COLUMNS)


@templates_group.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@with_appcontext
def show_command(name, as_json):
    """Show a template's rules in force and the live tasks that reference it (tenant/name)."""
    from console.extensions import db
    from console.services.errors import ServiceError
    from console.services.scheduling import templates

    try:
        record = templates.get(name)
    except ServiceError as error:
        raise refused(error) from None
    shown = templates.as_dict(record)
    tasks = db.session.execute(templates.inheriting(record)).scalars().all()
    names = sorted(f"{task.tenant.name}/{task.name}" for task in tasks)
    if as_json:
        click.echo(json.dumps({**shown, "tasks": names}, indent=2))
        return
    click.echo(f"{shown['name']}  version {shown['version']} by {shown['updated_by']} at {shown['updated_at'][:19]}")
    if shown["description"]:
        click.echo(shown["description"])
    for rule, value in shown["rules"].items():
        click.echo(f"  {rule}: {'none' if value is None else json.dumps(value) if isinstance(value, dict) else value}")
    more = f" (the first {SHOWN_TASKS})" if len(names) > SHOWN_TASKS else ""
    click.echo(f"referenced by {len(names)} task(s){more}" + (": " + ", ".join(names[:SHOWN_TASKS]) if names else ""))
