"""`rebound audit verify`: check the audit chain row by row and against its published anchors."""

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
