"""`rebound create-user`, `set-password`, `create-token` and `revoke-token`: a person's account, its password, and the
bearer tokens acting as one."""

import click
from flask.cli import with_appcontext


@click.command("create-user")
@click.argument("username")
@click.option("--role", required=True, type=click.Choice(["viewer", "operator", "approver", "manager", "admin"]))
@click.option("--password", default=None, help="Generated and printed when omitted.")
@click.option("--ask-password", is_flag=True,
              help="Ask for the password (twice, hidden) rather than take it from the command line, where other "
                   "accounts on the host can read it (ps, shell history).")
@click.option("--tenant", default=None, help="Limit the user to one tenant.")
@with_appcontext
def create_user_command(username, role, password, ask_password, tenant):
    """Create a user."""
    from console.commands.terminal import cli_actor
    from console.services.errors import ServiceError
    from console.services.people import tenants, users

    if ask_password and password is not None:
        raise click.UsageError("give --password or --ask-password, not both")
    if ask_password:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    try:
        scope = tenants.require(tenant) if tenant else None
        user, generated = users.create(username, role, password, cli_actor(), tenant=scope)
    except ServiceError as error:
        raise click.ClickException(error.detail) from None
    click.echo(f"Created {user.username} ({user.role}" + (f", tenant {scope.name} only" if scope else "") + ").")
    if generated:
        click.echo(f"Password: {generated}")


@click.command("set-password")
@click.argument("username")
@click.option("--password", default=None, help="Asked for (twice, hidden) when omitted.")
@with_appcontext
def set_password_command(username, password):
    """Give USERNAME a new password (a forgotten or leaked one); it ends every session of theirs."""
    from console.commands.terminal import cli_actor
    from console.services.errors import ServiceError
    from console.services.people import users

    user = users.find(username)
    if user is None:
        raise click.ClickException(f"no user named {username!r}")
    if password is None:
        password = click.prompt("New password", hide_input=True, confirmation_prompt=True)
    try:
        users.set_password(user, password, cli_actor())
    except ServiceError as error:
        raise click.ClickException(error.detail) from None
    click.echo(f"Set a new password for {user.username}; their sessions are ended.")


@click.command("create-token")
@click.argument("username")
@click.option("--tenant", default=None, help="Limit the token to one tenant.")
@click.option("--name", default="cli", show_default=True)
@click.option("--days", type=click.IntRange(1, 3650), default=None,
              help="Stop working this many days from now (default: works until revoked).")
@with_appcontext
def create_token_command(username, tenant, name, days):
    """Print a new bearer token acting as USERNAME."""
    from console.commands.terminal import cli_actor
    from console.services.errors import ServiceError
    from console.services.people import tenants, tokens, users

    user = users.find(username)
    if user is None:
        raise click.ClickException(f"no user named {username!r}")
    try:
        scope = tenants.require(tenant) if tenant else None
        _, plaintext = tokens.issue(user, cli_actor(), name=name, tenant=scope, days=days)
    except ServiceError as error:
        raise click.ClickException(error.detail) from None
    click.echo(plaintext)


@click.command("revoke-token")
@click.argument("prefix")
@with_appcontext
def revoke_token_command(prefix):
    """Revoke the token whose prefix is PREFIX (rb_ and 7 characters: Admin → API tokens, or GET /api/me); the whole
    token works too, and is never printed back."""
    from console.commands.terminal import cli_actor
    from console.services.people import tokens

    found = tokens.matching(prefix)
    prefix = prefix.strip()[:tokens.PREFIX_CHARS]  # said back: its prefix, and nothing of a secret pasted
    if not found:
        raise click.ClickException(f"no token has the prefix {prefix!r}, and none is the whole token given; Admin "
                                   "→ API tokens lists them")
    if len(found) > 1:  # 7 random characters: two alike are all but impossible, and then neither is guessed
        raise click.ClickException(f"{len(found)} tokens have the prefix {prefix!r}; revoke them in Admin → API tokens")
    token = found[0]
    if token.revoked_at is not None:
        click.echo(f"{token.prefix}… ({token.user.username}, {token.name}) was already revoked.")
        return
    tokens.revoke(token.id, cli_actor())
    click.echo(f"Revoked {token.prefix}… ({token.user.username}, {token.name}); it no longer authenticates.")
