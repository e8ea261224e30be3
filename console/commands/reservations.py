"""`rebound reservations …`: list capacity reservations, reserve capacity for a tenant, cancel one (audited as cli)."""

import json

import click
from flask.cli import with_appcontext

from console.commands.output import ROW_ID, refused, table
from console.commands.terminal import cli_actor

COLUMNS = ["id", "tenant", "running_slots", "queued_runs", "starts_at", "ends_at", "reason", "created_by",
           "cancelled_at"]


@click.group("reservations")
def reservations_group():
    """Capacity reservations: list them, reserve running slots and queued runs for a tenant, cancel one."""


@reservations_group.command("list")
@click.option("--tenant", default=None, help="Only this tenant's.")
@click.option("--all", "include_past", is_flag=True, help="Also those that ended or were cancelled.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@with_appcontext
def list_command(tenant, include_past, as_json):
    """List the reservations in force now or later, soonest first."""
    from console.domain.clock import utcnow
    from console.services.errors import ServiceError
    from console.services.people import tenants
    from console.services.scheduling import reservations

    try:
        tenant_id = tenants.visible(tenant, None).id if tenant else None
    except ServiceError as error:
        raise refused(error) from None
    rows = reservations.listing(None, utcnow(), tenant_id=tenant_id, include_past=include_past)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif not rows:
        click.echo("no capacity reserved" + (" (now or later)" if not include_past else ""))
    else:
        table(rows, COLUMNS if include_past else COLUMNS[:-1])


@reservations_group.command("reserve")
@click.argument("tenant")
@click.option("--running-slots", required=True, help="Running slots to hold for the tenant.")
@click.option("--queued-runs", default="0", show_default=True, help="Queued runs to allow the tenant beyond its quota.")
@click.option("--starts-at", required=True, help="ISO 8601 with a zone, e.g. 2026-12-31T18:00:00Z.")
@click.option("--ends-at", required=True, help="ISO 8601 with a zone, after --starts-at.")
@click.option("--reason", required=True, help="Who needs the capacity, for what (1-255 characters).")
@with_appcontext
def reserve_command(tenant, running_slots, queued_runs, starts_at, ends_at, reason):
    """Reserve capacity for a tenant over [starts-at, ends-at); refused (exit 1) if more than is free then."""
    from console.extensions import db
    from console.services.errors import ServiceError
    from console.services.scheduling import reservations

    try:
        made = reservations.create(tenant, cli_actor(), running_slots=running_slots, queued_runs=queued_runs,
                                   starts_at=starts_at, ends_at=ends_at, reason=reason)
    except ServiceError as error:
        db.session.rollback()
        raise refused(error) from None
    click.echo(f"Reserved {reservations.holds(made)} for {made['tenant']} from {made['starts_at']} to "
               f"{made['ends_at']} (reservation {made['id']}).")


@reservations_group.command("cancel")
@click.argument("reservation_id", type=ROW_ID)
@with_appcontext
def cancel_command(reservation_id):
    """Cancel a reservation: its slots are free at once."""
    from console.extensions import db
    from console.services.errors import ServiceError
    from console.services.scheduling import reservations

    try:
        done = reservations.cancel(reservation_id, cli_actor())
    except ServiceError as error:
        db.session.rollback()
        raise refused(error) from None
    click.echo(f"Cancelled reservation {done['id']} of {done['tenant']}: {reservations.freed(done)}.")
