"""`rebound channels reseal`: seal channel URLs and secrets saved before sealing, or with a key rotated out."""

import click
from flask.cli import with_appcontext


@click.group("channels")
def channels_group():
    """Alert and work-order channels saved in the console."""


@channels_group.command("reseal")
@with_appcontext
def reseal_command():
    """Seal every saved channel URL and secret with the current secret key (plaintext or older-key ones)."""
    from console.commands.terminal import cli_actor
    from console.services.delivery import targets
    from console.services.errors import ServiceError

    try:
        done = targets.reseal_all(cli_actor("channels reseal (cli)"))
    except ServiceError as error:
        click.echo(error.detail, err=True)
        raise SystemExit(1) from None
    for name in done["resealed"]:
        click.echo(f"{name}: sealed with the current key")
    for name in done["current"]:
        click.echo(f"{name}: already sealed with the current key")
    for name in done["unreadable"]:
        click.echo(f"{name}: unreadable with every key in force: enter it again in Admin → Channels, or put the "
                   "old key in REBOUND_SECRET_KEY_FALLBACKS and run this again", err=True)
    if not any(done.values()):
        click.echo("no channel URL or secret is saved in the console")
    if done["unreadable"]:
        raise SystemExit(1)
