"""`rebound tenants …`: list tenants with their quotas and use now, create one, set its quotas (audited)."""

import json

import click
from flask.cli import with_appcontext

from console.commands.output import refused, table
from console.commands.terminal import cli_actor

COLUMNS = ["name", "running", "max_running", "queued", "max_queued"]


@click.group("tenants")
def tenants_group():
    """List tenants, create one, set its quotas."""


@tenants_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def list_command(as_json):
    """List every tenant with its quotas and its running and queued runs now."""
    from console.services.people import tenants

    rows = [row.as_dict() for row in tenants.usage(None)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table(rows, COLUMNS)


@tenants_group.command("create")
@click.argument("name")
@click.option("--max-running", default=None, help="Runs running at once (default 100).")
@click.option("--max-queued", default=None, help="Runs waiting (default 10000).")
@with_appcontext
def create_command(name, max_running, max_queued):
    """Create a tenant."""
    from console.extensions import db
    from console.services.errors import ServiceError
    from console.services.people import tenants

    try:
        tenant = tenants.create(name, cli_actor(), max_running=max_running, max_queued=max_queued)
    except ServiceError as error:
        db.session.rollback()
        raise refused(error) from None
    click.echo(f"Created tenant {tenant.name}: max_running {tenant.max_running}, max_queued {tenant.max_queued}.")


@tenants_group.command("set-quota")
@click.argument("name")
@click.option("--max-running", default=None, help="Runs running at once.")
@click.option("--max-queued", default=None, help="Runs waiting.")
@with_appcontext
def set_quota_command(name, max_running, max_queued):
    """Set a tenant's quotas (either or both)."""
    from console.extensions import db
    from console.services.errors import ServiceError
    from console.services.people import tenants

    try:
        tenant = tenants.set_quota(tenants.visible(name, None), cli_actor(), max_running=max_running,
                                   max_queued=max_queued)
    except ServiceError as error:
        db.session.rollback()
        raise refused(error) from None
    click.echo(f"Saved tenant {tenant.name}: max_running {tenant.max_running}, max_queued {tenant.max_queued}.")
