"""The schema's migrations (Alembic, through Flask-Migrate), wired to an app only when something migrates.

Importing Flask-Migrate imports Alembic: 0.12 s that every worker, scheduler, web server and CLI command paid at start
for a `db` command or an upgrade that only `rebound db …` and `rebound up` run.
"""

from pathlib import Path

import click
from flask import current_app
from flask.cli import ScriptInfo

from console.extensions import db

# The project's migrations/ folder, beside console/.
MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def setup(app) -> None:
    """Wire Flask-Migrate to the app once: its commands and upgrade() read app.extensions["migrate"]."""
    if "migrate" not in app.extensions:
        from flask_migrate import Migrate

        # Batch mode: SQLite alters a table by copying it, which Alembic does only when asked.
        Migrate(app, db, directory=str(MIGRATIONS), render_as_batch=True)


def upgrade(revision: str = "head") -> None:
    """Apply the migrations up to `revision` to the current app's database."""
    setup(current_app)
    from flask_migrate import upgrade as apply

    apply(revision=revision)


# Flask-Migrate's commands for writing migrations: still there for a developer, not offered in an operator's --help.
FOR_DEVELOPERS = frozenset({"init", "migrate", "revision", "edit", "merge", "list-templates", "check", "branches"})


class LazyMigrationCommands(click.Group):
    """`rebound db …`: Flask-Migrate's own command group, imported when it is used, not when the app is built."""

    def __init__(self):
        super().__init__("db", help="Perform database migrations (Flask-Migrate / Alembic).")

    def make_context(self, info_name, args, parent=None, **extra):
        # The real group parses and runs what follows `db` (its options, its subcommands, --help) as if named itself.
        setup(parent.ensure_object(ScriptInfo).load_app())
        from flask_migrate.cli import db as commands

        for name in FOR_DEVELOPERS & commands.commands.keys():
            commands.commands[name].hidden = True
        return commands.make_context(info_name, args, parent=parent, **extra)


def init_app(app) -> None:
    app.cli.add_command(LazyMigrationCommands())
