"""`rebound quota-classes list|set NAME --max-running N|delete NAME`: the pages' and API's service, audited as cli."""

import json
import re

import click
from flask.cli import with_appcontext

from console.commands.output import refused, table
from console.commands.terminal import cli_actor

COLUMNS = ["name", "max_running", "tasks", "running", "description"]


@click.group("quota-classes")
def quota_classes_group():
    """Quota classes: list them with their use now, create or change one, delete one no task or template names."""


@quota_classes_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def list_command(as_json):
    """List every class with its max_running, its live tasks and their running runs now (every tenant's)."""
    from console.services.scheduling import quota_classes

    tasks, running = quota_classes.counts(None)
    rows = [{**quota_classes.as_dict(record, tasks.get(record.name, 0)), "running": running.get(record.name, 0)}
            for record in quota_classes.all_classes()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif not rows:
        click.echo("no quota classes")
    else:
        table(rows, COLUMNS)


@quota_classes_group.command("set")
@click.argument("name")
@click.option("--max-running", required=True, help="Runs of the class's tasks running at once.")
@click.option("--description", default=None, help="What the class is for (kept when left out).")
@with_appcontext
def set_command(name, max_running, description):
    """Create the class, or change its max_running (and description) if it exists."""
    from console.extensions import db
    from console.services.errors import ServiceError
    from console.services.scheduling import quota_classes

    # A whole number is passed on as one; anything else as typed, for the service to refuse in its own words.
    max_running = int(max_running) if re.fullmatch(r"-?[0-9]{1,9}", max_running.strip()) else max_running
    try:
        if quota_classes.find(name) is None:
            record = quota_classes.create(name, max_running, cli_actor(), description=description)
            click.echo(f"Created quota class {record.name}: at most {record.max_running} of its tasks' runs at once.")
            return
        kept = quota_classes.get(name)
        before, described = kept.max_running, kept.description
        record = quota_classes.change(name, cli_actor(), max_running=max_running, description=description)
    except ServiceError as error:
        db.session.rollback()
        raise refused(error) from None
    # A new description alone was saved and audited while this said "stays" (helper 109).
    new_words = " Its description is new." if record.description != described else ""
    if record.max_running == before:
        click.echo(f"Quota class {record.name} stays at {record.max_running} at once.{new_words}")
    else:
        click.echo(f"Saved quota class {record.name}: at most {record.max_running} at once (was {before}).{new_words}")


@quota_classes_group.command("delete")
@click.argument("name")
@with_appcontext
def delete_command(name):
    """Delete a class no live task or template names; one in use is refused, naming them."""
    from console.extensions import db
    from console.services.errors import ServiceError
    from console.services.scheduling import quota_class_deletion

    try:
        quota_class_deletion.delete(name, cli_actor())
    except ServiceError as error:
        db.session.rollback()
        raise refused(error) from None
    click.echo(f"Deleted quota class {name}.")
