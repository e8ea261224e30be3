"""The `rebound` console script (also `flask --app app ...`): build the app, whose commands console/commands adds."""

import logging
import os
import sys
from importlib.metadata import version

import click
from flask.cli import FlaskGroup
from sqlalchemy.exc import DBAPIError

from console.logs import configure as configure_logging


def _create_app():
    from console import create_app

    return create_app()


def _schema_missing(error: DBAPIError) -> bool:
    """Tell whether a database error says a table does not exist (SQLite's message, PostgreSQL's SQLSTATE 42P01)."""
    return "no such table" in str(error.orig) or getattr(error.orig, "sqlstate", None) == "42P01"


# The processes that run until stopped log their INFO lines (what an operator follows); a one-shot command prints
# its answer, and its INFO lines (JSON when piped) would only bury it: it logs warnings and worse unless told.
SERVING = frozenset({"up", "web", "worker", "scheduler"})


def _command(argv: list[str]) -> str | None:
    """Return the command named on the line, past the group's own options (--env-file and --app take a value)."""
    words = iter(argv[1:])
    for word in words:
        if word in ("-e", "--env-file", "-A", "--app"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _level(argv: list[str]) -> str | None:
    """Return the log level a command gets when REBOUND_LOG_LEVEL does not say (None: the configured default)."""
    return None if _command(argv) in SERVING or os.environ.get("REBOUND_LOG_LEVEL") else "WARNING"


def _tidy_group_options(group: click.Group) -> None:
    """Hide Flask's --app and --debug (Rebound is one app, configured by REBOUND_*) and say what --env-file is for."""
    for option in group.params:
        if option.name in ("app", "debug"):
            option.hidden = True
        elif option.name == "env_file":
            option.help = ("Read REBOUND_* settings from this file (KEY=value lines); a variable already set in "
                           "the environment wins.")


def main() -> None:
    """Entry point of the `rebound` console script."""
    configure_logging(_level(sys.argv))
    if _command(sys.argv) == "db":
        # Alembic's lines are quiet in every process that migrates at its start; `rebound db upgrade` is asked
        # to migrate, and without them said nothing of what it did ("Running upgrade a30… -> a31…").
        logging.getLogger("alembic").setLevel(logging.INFO)
    # Not Flask's `run` (a development server), `shell` and `routes`, nor its --version (Flask's, not Rebound's).
    group = FlaskGroup(create_app=_create_app, help="Rebound: ops console for background tasks that fail.",
                       add_default_commands=False, add_version_option=False)
    click.version_option(version("rebound"), prog_name="rebound", message="%(prog)s %(version)s")(group)
    _tidy_group_options(group)
    try:
        group(prog_name="rebound")
    except DBAPIError as error:
        if not _schema_missing(error):
            raise
        # A command run against a database nobody migrated (or migrated to an older release): say what to do
        # instead of a page of traceback.
        raise SystemExit(f"Error: the database lacks Rebound's tables ({error.orig}). Run `rebound db upgrade` "
                         "first (`rebound up` does it itself).") from None


if __name__ == "__main__":
    main()
