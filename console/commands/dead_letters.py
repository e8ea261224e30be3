"""`rebound dlq …`: list open dead letters and replay some by id, from a terminal (audited as `cli`)."""

import json

import click
from flask.cli import with_appcontext

from console.commands.output import ROW_ID, table

COLUMNS = ["id", "tenant", "handler", "error_code", "attempts", "run_id", "work_order_id", "created_at", "message"]


@click.group("dlq")
def dlq_group():
    """List open dead letters; replay some by id."""


@dlq_group.command("list")
@click.option("--tenant", default="", help="Only this tenant's letters.")
@click.option("--code", "error_code", default="", help="Only letters with this error code.")
@click.option("--handler", default="", help="Only letters of this handler (python:demo.flaky).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="At most this many, newest first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def list_command(tenant, error_code, handler, limit, as_json):
    """List open dead letters, newest first."""
    from console.services.dlq import groups
    from console.services.errors import InvalidInput
    from console.services.people import tenants

    if tenant and tenants.find(tenant) is None:
        raise click.BadParameter(f"no tenant named {tenant!r}", param_hint="--tenant")
    try:
        newest = groups.newest_open(tenant=tenant, error_code=error_code, handler=handler, limit=limit)
    except InvalidInput as error:
        raise click.BadParameter(error.detail, param_hint=f"--{error.field}") from None
    found = [{"id": letter.id, "tenant": name, "handler": letter.handler, "error_code": letter.error_code,
              "attempts": letter.attempts, "run_id": letter.run_id, "work_order_id": letter.work_order_id,
              "created_at": letter.created_at.isoformat(), "message": (letter.error_message or "")[:80]}
             for letter, name in newest]
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    table(found, COLUMNS)


@dlq_group.command("replay")
@click.argument("letter_ids", nargs=-1, required=True, type=ROW_ID)
@with_appcontext
def replay_command(letter_ids):
    """Replay these open dead letters now: each run starts a new attempt series with the same idempotency key."""
    from console.commands.terminal import cli_actor
    from console.extensions import db
    from console.models import Run
    from console.services.engine import replays
    from console.services.recovery.workflows.words import workflow_replay

    ids = list(dict.fromkeys(letter_ids))
    done = replays.replay_many(ids, cli_actor())
    for letter_id, run_id in done.runs.items():
        run = db.session.get(Run, run_id)
        step = f" {workflow_replay(run)}" if run.workflow_id else ""  # as the console's Replay says it
        click.echo(f"Dead letter #{letter_id}: run #{run_id} replayed.{step}")
    if done.closed_fixes:
        click.echo("Params fixes waiting for approval closed (their letters are replayed): "
                   + ", ".join(f"#{fix}" for fix in done.closed_fixes))
    if done.skipped:
        # Not open any more, or no such letter: said, and the exit code tells a script.
        raise click.ClickException("not replayed (no such open dead letter, or its run is not dead): "
                                   + ", ".join(f"#{letter_id}" for letter_id in done.skipped))
