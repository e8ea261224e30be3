"""`rebound create-user` and `create-token`: a person's account, and a bearer token acting as one."""

import click
from flask.cli import with_appcontext


@click.command("create-user")
@click.argument("username")
@click.option("--role", required=True, type=click.Choice(["viewer", "operator", "approver", "manager", "admin"]))
@click.option("--password", default=None, help="Generated and printed when omitted.")
@click.option("--tenant", default=None, help="Limit the user to one tenant.")
@with_appcontext
def create_user_command(username, role, password, tenant):
    """Create a user."""
    from console.services.actor import Actor
    from console.services.errors import ServiceError
    from console.services.people import tenants, users

    try:
        scope = tenants.require(tenant) if tenant else None
        user, generated = users.create(username, role, password, Actor("cli"), tenant=scope)
    except ServiceError as error:
        raise click.ClickException(error.detail) from None
    click.echo(f"Created {user.username} ({user.role}).")
    if generated:
        click.echo(f"Password: {generated}")


@click.command("create-token")
@click.argument("username")
@click.option("--tenant", default=None, help="Limit the token to one tenant.")
@click.option("--name", default="cli", show_default=True)
@with_appcontext
def create_token_command(username, tenant, name):
    """Print a new bearer token acting as USERNAME."""
    from console.services.actor import Actor
    from console.services.errors import ServiceError
    from console.services.people import tenants, tokens, users

    user = users.find(username)
    if user is None:
        raise click.ClickException(f"no user named {username!r}")
    try:
        scope = tenants.require(tenant) if tenant else None
        _, plaintext = tokens.issue(user, Actor("cli"), name=name, tenant=scope)
    except ServiceError as error:
        raise click.ClickException(error.detail) from None
    click.echo(plaintext)
