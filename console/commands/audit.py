"""`rebound audit …`: check the audit chain row by row and against its published anchors; search the log."""

import json

import click
from flask.cli import with_appcontext

from console.domain.words import plural


@click.group("audit")
def audit_group():
    """Inspect the audit log."""


@audit_group.command("verify")
@with_appcontext
def audit_verify_command():
    """Check the audit chain row by row and against every published anchor; then anchor its head."""
    from console.extensions import db
    from console.services.audit import trail as audit

    report = audit.verify(db.session)
    if not report.ok:
        where = f"row {report.first_bad_seq}" if report.first_bad_seq else "its anchors"
        also = "".join(f"\n  also: {problem}" for _, problem in report.also)
        more = f"\n  and {plural(report.unlisted, 'more problem')}" if report.unlisted else ""
        raise click.ClickException(f"audit chain broken at {where}: {report.problem}{also}{more}")
    legacy = f" ({plural(report.legacy, 'legacy row')} chained before the key)" if report.legacy else ""
    click.echo(f"audit chain intact: {plural(report.checked, 'row')} verified{legacy}, "
               f"{plural(report.anchors, 'anchor')} checked in {report.anchor_file}")


@audit_group.command("list")
@click.option("--actor", default="", help="Only entries by actors whose name starts so (a username, cli, system).")
@click.option("--action", default="", help="Only actions that start so (dead_letter., task.pause).")
@click.option("--target", default="", help="Only this target: a type (task) or type:id (task:12).")
@click.option("--tenant", default=None, help="Only this tenant's entries.")
@click.option("--since", default="", help="From this day on (YYYY-MM-DD, UTC).")
@click.option("--until", default="", help="Up to the end of this day (YYYY-MM-DD, UTC).")
@click.option("--hide-sign-ins", is_flag=True, help="Leave out sign-ins and sign-outs (auth.*).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="At most this many, newest first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (every column, as the console's export).")
@with_appcontext
def audit_list_command(actor, action, target, tenant, since, until, hide_sign_ins, limit, as_json):
    """Search the audit log, newest first (times in UTC), as the Audit page filters it."""
    from console.commands.output import table
    from console.services.audit import export
    from console.services.audit import query as audit_query
    from console.services.people import tenants

    if tenant and tenants.find(tenant) is None:
        raise click.BadParameter(f"no tenant named {tenant!r}", param_hint="--tenant")
    filters, wrong = audit_query.from_args({"actor": actor, "action": action, "target": target, "since": since,
                                            "until": until, "hide_signins": "1" if hide_sign_ins else ""})
    if wrong:
        said = "; ".join(wrong)
        for name in ("since", "until"):  # the page's query words, as the options a person typed
            said = said.replace(f"{name}=", f"--{name} ")
        raise click.UsageError(said)
    entries, _ = audit_query.page(**{**filters, "before_seq": None}, tenant=tenant, limit=limit)
    rows = [export.as_dict(entry) for entry in entries]
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table([{**row, "at": f"{entry.at:%Y-%m-%d %H:%M:%S}",
            "target": f"{row['target_type']}:{row['target_id']}" if row["target_id"] else row["target_type"],
            "note": (row["note"] or "")[:80]}
           for row, entry in zip(rows, entries, strict=True)],
          ["seq", "at", "actor", "action", "target", "tenant", "note"])
