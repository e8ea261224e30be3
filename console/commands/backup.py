"""`rebound backup DIR`: a consistent copy of a running deployment, to restore as the README says."""

from pathlib import Path

import click
from flask import current_app
from flask.cli import with_appcontext


@click.command("backup")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@with_appcontext
def backup_command(directory):
    """Copy the SQLite database (online, while everything runs), the secret key and the audit anchors into a new
    DIRECTORY."""
    from console.commands.terminal import cli_actor
    from console.extensions import db
    from console.services.audit import anchors
    from console.services.audit import trail as audit
    from console.services.errors import ServiceError
    from console.services.system import backup

    config = current_app.config
    try:
        made = backup.backup(directory, config["SQLALCHEMY_DATABASE_URI"], Path(config["DATA_DIR"]), anchors.path())
    except ServiceError as error:
        raise click.ClickException(f"refused ({error.code}, {error.status}): {error.detail}") from None
    # After the copy, so the backup holds no row saying it was taken.
    audit.record(db.session, cli_actor(), "backup.create", "backup", str(made.directory),
                 after={"files": made.files, "database_bytes": made.database_bytes})
    db.session.commit()
    click.echo(f"Backed up to {made.directory}: {', '.join(made.files)} ({made.database_bytes:,} bytes of database)."
               " Keep the directory as safe as the data dir: its secret_key signs sessions and keys the audit chain.")
