"""`rebound approvals …`: list and read four-eyes requests, and decide them as a named person (never one's own)."""

import json

import click
from flask.cli import with_appcontext

from console.commands.output import ROW_ID, refused

LIST_COLUMNS = ["id", "kind", "status", "tenant", "requested_by", "created_at", "expires_at", "reason"]


def _person(username: str):
    """Return the actor and tenant scope of the person a decision is made as."""
    from sqlalchemy import select

    from console.commands.terminal import cli_actor
    from console.extensions import db
    from console.models import User

    user = db.session.execute(select(User).where(User.username == username)).scalar_one_or_none()
    if user is None or not user.active:
        raise click.ClickException(f"no active user {username!r}")
    return cli_actor(f"{user.username} (cli)", user.id), user.tenant_id


def _decide(action: str, approval_id: int, username: str, note: str | None) -> None:
    from console.extensions import db
    from console.services.errors import ServiceError
    from console.services.recovery import decisions

    actor, scope = _person(username)
    try:
        decided = getattr(decisions, action)(approval_id, actor, note, tenant_id=scope)
    except ServiceError as error:
        db.session.rollback()
        raise refused(error) from None
    # What it did, not its status alone: "is executed" read as done where a runbook was only queued (helper 109).
    # A rollback's outcome is still the change's own: said as what was undone ("…: discarded 12 dead letters" read as
    # the rollback discarding them; helper 139).
    outcome = (f" (it had: {decided.outcome})" if action == "rollback" else f": {decided.outcome}") \
        if decided.outcome else ""
    click.echo(f"request #{decided.id} is {decided.status.replace('_', ' ')}{outcome}")


@click.group("approvals")
def approvals_group():
    """Four-eyes requests for data fixes: list, show, approve, reject, roll back, withdraw."""


@approvals_group.command("list")
@click.option("--status", default="pending", show_default=True, help="pending, executed, failed, rejected, "
              "withdrawn, expired, superseded, rolled_back, or 'all'.")
@click.option("--kind", default=None, help="Only this kind of change: dead_letter.fix_params, dlq.discard_bulk, "
              "run.compensate or runbook.execute.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--before", type=ROW_ID, default=None, help="Older than this request: the next_before a list printed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON as GET /api/approvals answers: {items, next_before}.")
@with_appcontext
def list_command(status, kind, limit, before, as_json):
    """List requests, newest first."""
    from console.domain.clock import utcnow
    from console.services.errors import ServiceError
    from console.services.recovery import shown

    try:
        found = shown.page(status=None if status == "all" else status, tenant_id=None, before=before, limit=limit,
                           now=utcnow(), kind=kind)
    except ServiceError as error:
        raise refused(error) from None
    if as_json:
        click.echo(json.dumps(found, indent=2, default=str))
        return
    rows = found["items"]
    if not rows:
        click.echo(f"no {'' if status == 'all' else status + ' '}requests")
        return
    cells = [[str(row[c] if row[c] is not None else "-")[:60] for c in LIST_COLUMNS] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(LIST_COLUMNS)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(LIST_COLUMNS, widths, strict=True)))
    for r in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))
    if found["next_before"]:
        click.echo(f"older requests: --before {found['next_before']}")


@approvals_group.command("show")
@click.argument("approval_id", type=ROW_ID)
@click.option("--json", "as_json", is_flag=True, help="Print JSON, as GET /api/approvals/ID answers.")
@with_appcontext
def show_command(approval_id, as_json):
    """Show one request: who asked, why, and the change before → after."""
    from console.domain import diff
    from console.domain.clock import utcnow
    from console.extensions import db
    from console.models import User
    from console.services.errors import ServiceError
    from console.services.recovery import approvals, shown

    try:
        request = shown.as_dict(approvals.row(approvals.get(approval_id)), utcnow())
    except ServiceError as error:
        raise refused(error) from None
    if as_json:
        click.echo(json.dumps(request, indent=2, default=str))
        return
    click.echo(f"request #{request['id']}: {request['title']} ({request['kind']})")
    # The outcome is what was said when the change ran ("queued for a worker"); "… now" below is how it stands. One
    # that never ran (superseded, expired) says why instead (helper 167).
    ran = request["executed_at"] is not None
    said = {"outcome": "outcome when it ran" if ran else "outcome"}
    undoer_id = approvals.get(approval_id).rolled_back_by_id
    request["rolled_back_by"] = db.session.get(User, undoer_id).username if undoer_id else None
    for key in ("status", "tenant", "requested_by", "created_at", "expires_at", "decided_by", "decided_at", "note",
                "outcome", "rolled_back_by", "rolled_back_at", "rollback_note"):
        if request[key] is not None:
            click.echo(f"  {said.get(key, key.replace('_', ' '))}: {request[key]}")
    click.echo(f"  subject: {request['subject']['type']} {request['subject']['id']}")
    # How what it acted on stands now: `outcome` is what was said when it ran ("queued for a worker").
    if request["run"]:
        click.echo(f"  run now: #{request['run']['id']} {request['run']['status']} (series {request['run']['series']})")
    if request["execution"]:
        execution = request["execution"]
        click.echo(f"  execution now: #{execution['id']} {execution['status']}, {execution['changes_total']} "
                   f"change{'s' if execution['changes_total'] != 1 else ''}")
    click.echo(f"  reason: {request['reason']}")
    click.echo("change (before -> after):")
    for change in diff.changes(request["before"], request["after"]):
        click.echo(f"  {change.path or '(value)'}: {_one_line(change.before)} -> {_one_line(change.after)}")


def _one_line(value) -> str:
    from console.domain import diff

    return "-" if value is diff.MISSING else json.dumps(value, sort_keys=True, default=str)


@approvals_group.command("approve")
@click.argument("approval_id", type=ROW_ID)
@click.option("--as", "username", required=True, help="The approver: a person with the approve permission.")
@click.option("--note", default=None)
@with_appcontext
def approve_command(approval_id, username, note):
    """Approve another person's request: its change runs now, once."""
    _decide("approve", approval_id, username, note)


@approvals_group.command("reject")
@click.argument("approval_id", type=ROW_ID)
@click.option("--as", "username", required=True, help="The approver: a person with the approve permission.")
@click.option("--note", required=True, help="Why not; the requester reads it.")
@with_appcontext
def reject_command(approval_id, username, note):
    """Reject another person's request; it never runs."""
    _decide("reject", approval_id, username, note)


@approvals_group.command("rollback")
@click.argument("approval_id", type=ROW_ID)
@click.option("--as", "username", required=True, help="A person with the approve permission.")
@click.option("--note", default=None)
@with_appcontext
def rollback_command(approval_id, username, note):
    """Roll an executed change back to its backup; refused if the rows changed since."""
    _decide("rollback", approval_id, username, note)


@approvals_group.command("withdraw")
@click.argument("approval_id", type=ROW_ID)
@click.option("--as", "username", required=True, help="The person who filed the request.")
@click.option("--note", default=None)
@with_appcontext
def withdraw_command(approval_id, username, note):
    """Take back one's own request while it waits; it never runs."""
    _decide("withdraw", approval_id, username, note)
