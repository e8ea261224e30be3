"""The `rebound` console script (also `flask --app app ...`): build the app, whose commands console/commands adds."""

import atexit
import logging
import os
import shutil
import sys
import tempfile
from importlib.metadata import version

import click
from flask.cli import FlaskGroup
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DatabaseError, DBAPIError, OperationalError

from console.config import data_dir_of, database_url
from console.logs import command_named
from console.logs import configure as configure_logging
from console.redis_conn import embedded_url, shown_url


def _create_app():
    from console import create_app

    missing = _missing_data_dir(sys.argv, os.environ)  # read here: an --env-file's settings are loaded by now
    if missing:
        raise SystemExit(missing)
    if ("--help" in sys.argv or command_named(sys.argv) is None) and not data_dir_of(os.environ).exists():
        _help_in_a_throwaway_dir()
    return create_app()


def _help_in_a_throwaway_dir() -> None:
    """Point this process at a temporary data dir, removed at its exit: help lists the commands, and made a deployment
    (a database and a new secret key) wherever a mistyped REBOUND_DATA_DIR pointed (helper 128)."""
    place = tempfile.mkdtemp(prefix="rebound-help-")
    atexit.register(shutil.rmtree, place, True)
    os.environ["REBOUND_DATA_DIR"] = place
    os.environ.pop("REBOUND_DATABASE_URL", None)  # a database elsewhere is not touched either


def _missing_data_dir(argv: list[str], env) -> str | None:
    """Say why a command that reads a deployment stops when its data dir does not exist (None: it may go on).

    Creating it would give a mistyped REBOUND_DATA_DIR an empty database and a new secret key, and the command an
    answer about nothing (`audit verify` of no rows, `tenants list` of none) instead of an error."""
    command = command_named(argv)
    if command is None:
        return None
    if env.get("REBOUND_DATABASE_URL") and env.get("REBOUND_SECRET_KEY"):
        return None  # a host that keeps nothing of Rebound's on its disk
    where = data_dir_of(env)
    fix = "Set REBOUND_DATA_DIR to the directory `rebound up` uses (or run it where that ./instance is)."
    if where.exists() and not where.is_dir():  # a traceback (NotADirectoryError) when the secret key was written
        return f"Error: the data dir {where} is a file, not a directory. {fix}"
    if command in MAKES_DATA_DIR or "--help" in argv:
        return None
    if not where.is_dir():
        return (f"Error: there is no Rebound data dir at {where}: `rebound {command}` reads a deployment's database "
                f"and secret key from it and creates neither. {fix}")
    # A directory that is not a deployment's got a new empty database and a new secret key, which a later
    # `rebound up` there would take for the deployment's (helper 109).
    lacking = [name for name, needed in (("secret_key", not env.get("REBOUND_SECRET_KEY")),
                                         ("rebound.db", not env.get("REBOUND_DATABASE_URL")))
               if needed and not (where / name).is_file()]
    if lacking:
        return (f"Error: {where} is not a Rebound data dir: it holds no {' and no '.join(lacking)}, and "
                f"`rebound {command}` creates neither. {fix}")
    return None


def _schema_missing(error: DBAPIError) -> bool:
    """Tell whether a database error says a table does not exist (SQLite's message, PostgreSQL's SQLSTATE 42P01)."""
    return "no such table" in str(error.orig) or getattr(error.orig, "sqlstate", None) == "42P01"


# The processes that run until stopped log their INFO lines (what an operator follows); a one-shot command prints
# its answer, and its INFO lines (JSON when piped) would only bury it: it logs warnings and worse unless told.
SERVING = frozenset({"up", "web", "worker", "scheduler"})
# The commands that may start a deployment on a data dir not made yet; every other one reads an existing one.
MAKES_DATA_DIR = SERVING | {"db", "create-user", "seed-demo"}


def _level(argv: list[str]) -> str | None:
    """Return the log level a command gets when REBOUND_LOG_LEVEL does not say (None: the configured default)."""
    return None if command_named(argv) in SERVING or os.environ.get("REBOUND_LOG_LEVEL") else "WARNING"


class ReboundGroup(FlaskGroup):
    """Flask's command group without what installed extensions plug into every Flask app's command line."""

    # Flask-Limiter's `limiter` maintenance commands arrive through the `flask.commands` entry point.
    LEFT_OUT = frozenset({"limiter"})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in super().list_commands(ctx) if name not in self.LEFT_OUT]

    def getcommand_named(self, ctx: click.Context, name: str) -> click.Command | None:
        return None if name in self.LEFT_OUT else super().getcommand_named(ctx, name)


def _tidy_group_options(group: click.Group) -> None:
    """Hide Flask's --app and --debug (Rebound is one app, configured by REBOUND_*) and say what --env-file is for."""
    for option in group.params:
        if option.name in ("app", "debug"):
            option.hidden = True
        elif option.name == "env_file":
            option.help = ("Read REBOUND_* settings from this file (KEY=value lines); a variable already set in "
                           "the environment wins.")


def _only_what_changed(record: logging.LogRecord) -> bool:
    """Keep alembic's "Running upgrade …" lines; drop its two about the database's dialect, said every time."""
    return not record.getMessage().startswith(("Context impl ", "Will assume "))


def _unreadable_argument(argv: list[str]) -> str | None:
    """Say which argument holds bytes that are not UTF-8 (Python keeps them as lone surrogates), else None."""
    for position, argument in enumerate(argv[1:], 1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            # Named, never shown: it may be a password (it was echoed back to the terminal; helper 111).
            option = argument.partition("=")[0] if argument.startswith("--") and "=" in argument else (
                argv[position - 1] if position > 1 and argv[position - 1].startswith("-") else None)
            what = f"the value of {option}" if option else "a value"
            return (f"Error: argument {position} ({what}) holds bytes that are not UTF-8; type it again in a UTF-8 "
                    "terminal. Nothing was done.")
    return None


def main() -> None:
    """Entry point of the `rebound` console script."""
    if refusal := _unreadable_argument(sys.argv):
        # Each command met such bytes where it stored or printed them: a traceback, a runbook execution failed
        # part-way, an approval rolled back (helper 109).
        raise SystemExit(refusal)
    configure_logging(_level(sys.argv))
    if command_named(sys.argv) == "db":
        # Alembic's lines are quiet in every process that migrates at its start; `rebound db upgrade` is asked
        # to migrate, and without them said nothing of what it did ("Running upgrade a30… -> a31…").
        logging.getLogger("alembic").setLevel(logging.INFO)
        logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)  # a line per plugin it loads
        logging.getLogger("alembic.runtime.migration").addFilter(_only_what_changed)
    # Not Flask's `run` (a development server), `shell` and `routes`, nor its --version (Flask's, not Rebound's).
    group = ReboundGroup(create_app=_create_app, help="Rebound: ops console for background tasks that fail.",
                       add_default_commands=False, add_version_option=False)
    click.version_option(version("rebound"), prog_name="rebound", message="%(prog)s %(version)s")(group)
    _tidy_group_options(group)
    try:
        group(prog_name="rebound")
    except DBAPIError as error:
        raise SystemExit(_database_trouble(error)) from None
    except (RedisConnectionError, RedisTimeoutError) as error:
        where = shown_url(os.environ.get("REBOUND_REDIS_URL") or embedded_url(str(data_dir_of(os.environ))))
        raise SystemExit(f"Error: cannot reach Redis at {where} ({error}). Check REBOUND_REDIS_URL and that the "
                         "server runs.") from None


def _database_trouble(error: DBAPIError) -> str:
    """Say in one line what is wrong with the database a command used, and what to do: not a page of traceback."""
    where = _database_named()
    cause = str(error.orig).strip().splitlines()[0] if str(error.orig).strip() else type(error.orig).__name__
    if _schema_missing(error):
        # A database nobody migrated (or migrated to an older release), or the wrong one: it is named.
        return (f"Error: the database {where} lacks Rebound's tables ({cause}). If it is the right one, run "
                "`rebound db upgrade` first (`rebound up` does it itself); if not, set REBOUND_DATABASE_URL "
                "or REBOUND_DATA_DIR.")
    if isinstance(error, OperationalError):
        return (f"Error: cannot use the database {where} ({cause}). Check REBOUND_DATABASE_URL and that the "
                "server runs.")
    if type(error) is DatabaseError:  # not one of its kinds a query of ours causes (integrity, programming, data)
        return (f"Error: the database {where} cannot be read ({cause}). Check that REBOUND_DATABASE_URL or "
                "REBOUND_DATA_DIR names Rebound's database; if it does, restore it from your backup.")
    raise error


def _database_named() -> str:
    """Name the database the settings point at, its password hidden."""
    url = make_url(database_url(os.environ, data_dir_of(os.environ)))
    return url.render_as_string(hide_password=True)


if __name__ == "__main__":
    main()
