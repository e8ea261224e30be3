"""`rebound recovery-runbook`: run a runbook from a terminal, in this process, printing its log as it goes."""

import contextlib
import os
import sys

import click
from flask import current_app
from flask.cli import with_appcontext


class _Printer:
    """Print a runbook's log while someone reads it: a reader that goes (`| head`) stops the printing, never the run.

    The log line that met the closed pipe raised BrokenPipeError inside the runbook, which failed it part-way, its
    execution left running until the reconciler called it a lost worker (helper 109)."""

    def __init__(self):
        self.gone = False

    def __call__(self, line: str) -> None:
        if self.gone:
            return
        try:
            click.echo(line)
        except BrokenPipeError:
            self.gone = True
            # Python flushes stdout again at exit: give it somewhere that takes the bytes (a test's stdout has no
            # real file behind it, and nothing to flush there).
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _params(pairs: tuple[str, ...]) -> dict:
    params = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name.strip():
            raise click.BadParameter(f"{pair!r}: write it as name=value", param_hint="--param")
        if name.strip() in params:  # the last kept silently: which one was meant is a guess (helper 109)
            raise click.BadParameter(f"{name.strip()} is given twice; give it once", param_hint="--param")
        params[name.strip()] = value
    return params


def _actor(username: str | None):
    """Return who acts, and their tenant wall: the named person (who must be able to operate), or the CLI."""
    from console.commands.terminal import cli_actor
    from console.services.people import users
    from console.services.people.permissions import OPERATE, can

    if username is None:
        return cli_actor(), None
    user = users.find(username)
    if user is None or not user.active:
        raise click.ClickException(f"no active user named {username!r}")
    if not can(user.role, OPERATE):
        raise click.ClickException(f"{username} is a {user.role}; running runbooks needs the operate permission")
    return cli_actor(f"{user.username} (cli)", user.id), user.tenant_id


def _list() -> None:
    from console.services.recovery import runbooks

    for item in runbooks.listing(None, latest=0):
        runbook = item.runbook
        gate = "needs approval" if item.needs_approval else "runs when asked"
        whole = ", whole system" if runbook.scope == "system" else ""
        click.echo(f"{runbook.name}  [{runbook.risk} risk, {gate}{whole}]")
        click.echo(f"    {runbook.title}: {runbook.description}")
        for param in runbook.params:
            kind = f"{param.type}{' ids' if param.many else ''}"
            extra = f" one of {', '.join(param.choices)};" if param.choices else ""
            default = f" default {param.shown_default};" if param.default is not None else ""
            need = "required" if param.required else "optional"
            click.echo(f"    --param {param.name}=…  {kind}, {need};{extra}{default} {param.help}".rstrip())
        click.echo("")


@click.command("recovery-runbook")
@click.argument("name", required=False)
@click.option("--param", "pairs", multiple=True, metavar="NAME=VALUE", help="A parameter; repeat for each.")
@click.option("--dry-run", is_flag=True, help="List the changes it would make; change nothing.")
@click.option("--reason", default=None, help="Why; required when a real run needs approval.")
@click.option("--as", "username", default=None, help="Act as this person (audit, approval, tenant wall).")
@click.option("--tenant", default=None, help="Only this tenant's objects (default: every tenant's).")
@click.option("--list", "listing", is_flag=True, help="List the runbooks and their parameters.")
@with_appcontext
def recovery_runbook_command(name, pairs, dry_run, reason, username, tenant, listing):
    """Run a runbook here and print its log; a real run that needs approval files the request instead."""
    from console.services.errors import ServiceError
    from console.services.recovery import runbook_runner, runbooks
    from console.services.recovery.runbook_params import InvalidParams

    if listing:
        _list()
        return
    if not name:
        raise click.UsageError("name a runbook, or use --list to see them")
    actor, scope = _actor(username)
    try:
        execution = runbooks.start(name, _params(pairs), actor, scope=scope, tenant=tenant, dry_run=dry_run,
                                   reason=reason, enqueue=False)
    except InvalidParams as invalid:
        # A runbook's own `reason` param is not --reason (why the execution is asked for): "--param reason: required"
        # read as a contradiction right after --reason was given (helper 167).
        hint = ("\n  (--reason says why the execution is asked for; this runbook's own reason is "
                "--param reason=...)") if reason and "reason" in invalid.errors else ""
        raise click.ClickException("nothing was started:\n" + "\n".join(
            f"  --param {field}: {message}" for field, message in invalid.errors.items()) + hint) from None
    except ServiceError as refused:
        raise click.ClickException(refused.detail) from None
    link = f"{current_app.config['CONSOLE_URL']}/runbooks/executions/{execution.id}"
    echo = _Printer()
    echo(f"Execution #{execution.id} of {execution.runbook}: {link}")
    if execution.status == "awaiting_approval":
        runbook_runner.preview(execution.id, on_line=echo)
        final = runbooks.get(execution.id)
        if final.status == "failed":
            raise click.ClickException(final.error)
        if final.status == "cancelled":  # its preview found nothing to change: the request closed itself
            echo(f"Nothing to approve: {final.error}.")
            return
        echo(f"Approval request #{execution.approval_id} is filed; once another person approves it, a worker runs it "
             "for real.")
        return
    status = runbook_runner.execute(execution.id, on_line=echo)
    if status != "succeeded":
        raise click.ClickException(f"execution #{execution.id} {status}: {runbooks.get(execution.id).error}")
