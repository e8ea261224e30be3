"""The `rebound` command itself: its version is Rebound's, and its commands are Rebound's."""

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from console.services.people import users
from tests.helpers import env_for, free_port


def rebound(app, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], env=env or env_for(app), capture_output=True,
                          text=True, timeout=60)


@pytest.mark.once  # help and version
def test_version_is_rebounds_and_help_lists_no_flask_development_commands(app):
    shown = rebound(app, "--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"rebound {version('rebound')}"
    listed = rebound(app, "--help").stdout
    commands = {line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line.strip()}
    assert {"up", "web", "worker", "scheduler", "set-password", "db"} <= commands
    assert not {"run", "shell", "routes", "limiter"} & commands  # Flask's and its extensions' tools are not Rebound's


@pytest.mark.once  # help and version
def test_db_help_offers_an_operator_the_commands_that_run_migrations_not_those_that_write_them(app):
    shown = rebound(app, "db", "--help")
    commands = {line.split()[0] for line in shown.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert {"upgrade", "downgrade", "current", "history", "stamp"} <= commands
    assert not {"init", "migrate", "revision", "merge", "edit"} & commands
    assert "plugin" not in shown.stderr  # Alembic's INFO lines are for what a migration did, not what it loaded
    assert rebound(app, "db", "revision", "--help").returncode == 0  # still there for a developer


@pytest.mark.once  # help and version
def test_help_shows_rebounds_own_options_not_flasks(app):
    listed = rebound(app, "--help").stdout
    assert "--env-file" in listed and "REBOUND_*" in listed
    assert "--app" not in listed and "--debug" not in listed  # Rebound is one app; debug mode is not for production


def test_env_file_supplies_settings_the_environment_lacks(app, tmp_path):
    env = env_for(app)
    settings = tmp_path / "rebound.env"
    settings.write_text(f"REBOUND_DATABASE_URL={env.pop('REBOUND_DATABASE_URL')}\n")
    made = rebound(app, "--env-file", str(settings), "create-user", "from-env-file", "--role", "viewer",
                   "--password", "env-file-pass-123", env=env)
    assert made.returncode == 0, made.stderr
    from console.models import User

    assert User.query.filter_by(username="from-env-file").one().role == "viewer"


@pytest.mark.once  # refused before any database is opened, or on a SQLite file of its own
def test_a_process_started_with_an_env_file_is_named_by_its_command_in_its_log(app, tmp_path):
    """Every line of a host started with `rebound -e FILE` read "process": "FILE" (helper 118)."""
    settings = tmp_path / "rebound.env"
    settings.write_text(f"REBOUND_DATABASE_URL=sqlite:///{tmp_path / 'fresh.db'}\nREBOUND_LOG_FORMAT=json\n")
    env = {key: value for key, value in env_for(app).items() if key not in ("REBOUND_DATABASE_URL",
                                                                           "REBOUND_LOG_FORMAT")}
    ran = rebound(app, "-e", str(settings), "db", "upgrade", env=env)
    lines = [json.loads(line) for line in ran.stderr.splitlines() if line.startswith("{")]
    assert ran.returncode == 0 and lines and {line["process"] for line in lines} == {"db"}, ran.stderr


def test_db_upgrade_says_which_migrations_it_ran(app, tmp_path):
    env = {**env_for(app), "REBOUND_DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.db'}", "REBOUND_LOG_FORMAT": "text"}
    ran = rebound(app, "db", "upgrade", env=env)
    assert ran.returncode == 0 and "Running upgrade  -> " in ran.stderr, ran.stderr
    assert ran.stderr.count("Running upgrade") == len(list((Path("migrations") / "versions").glob("*.py")))
    assert "Context impl" not in ran.stderr and "Will assume" not in ran.stderr  # the dialect, said every time


@pytest.mark.parametrize(("setting", "value", "says"), [
    ("REBOUND_DATABASE_URL", "notaurl", "REBOUND_DATABASE_URL is not a database URL Rebound can use"),
    ("REBOUND_LOG_LEVEL", "LOUD", "REBOUND_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"),
    ("REBOUND_DEMO", "maybe", "REBOUND_DEMO must be 1 or 0"),
    # Numbers outside what works, and words that read as their opposite (helper 118).
    ("REBOUND_PORT", "99999", "REBOUND_PORT must be a whole number from 1 to 65535, got '99999'"),
    ("REBOUND_MAX_BODY_BYTES", "-5", "REBOUND_MAX_BODY_BYTES must be a whole number from 1024 to 2147483648, got '-5'"),
    ("REBOUND_WORKERS", "0", "REBOUND_WORKERS must be a whole number from 1 to 1000, got '0'"),
    ("REBOUND_LEADER_TTL_S", "0", "REBOUND_LEADER_TTL_S must be a number at least 1, got '0'"),
    ("REBOUND_HEARTBEAT_S", "nan", "REBOUND_HEARTBEAT_S must be a number from 0.1 to 3600, got 'nan'"),
    ("REBOUND_ACCESS_LOG", "of", "REBOUND_ACCESS_LOG must be 1 or 0 (true/false, yes/no, on/off), got 'of'"),
    ("REBOUND_REDIS_URL", "notaurl", "REBOUND_REDIS_URL must be a redis://, rediss:// or unix:// URL"),
])
def test_a_setting_that_cannot_work_is_one_line_naming_it(app, setting, value, says):
    done = rebound(app, "tenants", "list", env={**env_for(app), setting: value})
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert says in done.stderr


def test_a_database_or_redis_nobody_answers_at_is_one_line_naming_it_without_its_password(app):
    port = free_port()
    database = rebound(app, "tenants", "list", env={
        **env_for(app), "REBOUND_DATABASE_URL": f"postgresql+psycopg://rebound:hunter22@127.0.0.1:{port}/none"})
    assert database.returncode == 1 and "Traceback" not in database.stderr, database.stderr
    assert f"cannot use the database postgresql+psycopg://rebound:***@127.0.0.1:{port}/none" in database.stderr
    cache = rebound(app, "retry-inspect", "--reconcile",
                    env={**env_for(app), "REBOUND_REDIS_URL": f"redis://:hunter22@127.0.0.1:{port}/0"})
    assert cache.returncode == 1 and "Traceback" not in cache.stderr, cache.stderr
    assert f"cannot reach Redis at redis://:***@127.0.0.1:{port}/0" in cache.stderr
    assert "hunter22" not in database.stderr + cache.stderr


@pytest.mark.once  # refused before any database is opened, or on a SQLite file of its own
def test_a_mistyped_data_dir_is_refused_by_a_command_that_reads_one_and_is_not_created(app, tmp_path):
    """A typo in REBOUND_DATA_DIR made a new empty deployment there: `tenants list` listed none, without an error."""
    typo = tmp_path / "instnace"
    env = {key: value for key, value in env_for(app).items()
           if key not in ("REBOUND_DATABASE_URL", "REBOUND_SECRET_KEY", "REBOUND_AUDIT_KEY")}
    for command in (("tenants", "list"), ("audit", "verify"), ("retry-inspect",)):
        done = rebound(app, *command, env={**env, "REBOUND_DATA_DIR": str(typo)})
        assert done.returncode == 1 and done.stderr.strip() == (
            f"Error: there is no Rebound data dir at {typo}: `rebound {command[0]}` reads a deployment's database "
            "and secret key from it and creates neither. Set REBOUND_DATA_DIR to the directory `rebound up` uses (or "
            "run it where that ./instance is)."), done.stderr
        assert not typo.exists()
    # Help lists the commands without making a deployment there either (helper 128: a database and a secret key).
    for asked, code in ((("tenants", "list", "--help"), 0), (("--help",), 0), ((), 2)):  # bare: Click's usage, 2
        assert rebound(app, *asked, env={**env, "REBOUND_DATA_DIR": str(typo)}).returncode == code
        assert not typo.exists(), asked
    made = rebound(app, "db", "upgrade", env={**env, "REBOUND_DATA_DIR": str(typo)})
    assert made.returncode == 0, made.stderr  # a deployment's first step may make it
    assert rebound(app, "tenants", "list", env={**env, "REBOUND_DATA_DIR": str(typo)}).returncode == 0


@pytest.mark.once  # refused before any database is opened, or on a SQLite file of its own
def test_a_data_dir_that_is_a_file_is_said_in_one_line(app, tmp_path):
    """`create-user` (which may make the data dir) wrote a NotADirectoryError traceback (helper 109)."""
    afile = tmp_path / "instance"
    afile.write_text("")
    env = {key: value for key, value in env_for(app).items()
           if key not in ("REBOUND_DATABASE_URL", "REBOUND_SECRET_KEY", "REBOUND_AUDIT_KEY")}
    for command in (("create-user", "bob", "--role", "viewer", "--password", "a-long-password-1"), ("tenants", "list"),
                    ("runs", "--help")):  # --help too (helper 128)
        done = rebound(app, *command, env={**env, "REBOUND_DATA_DIR": str(afile)})
        assert done.returncode == 1 and done.stderr.strip() == (
            f"Error: the data dir {afile} is a file, not a directory. Set REBOUND_DATA_DIR to the directory "
            "`rebound up` uses (or run it where that ./instance is)."), done.stderr


def test_an_argument_that_is_not_utf8_is_refused_before_anything_runs(app):
    # Each command met such bytes where it stored or printed them: a traceback, a runbook execution failed part-way,
    # an approval rolled back (helper 109).
    done = subprocess.run([sys.executable, "-m", "console.cli", "create-user", "tom2", "--role", "operator",
                           "--password", b"abc\xffdefghijklm"], env=env_for(app), capture_output=True, timeout=60)
    said = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in said
    assert "argument 6 (the value of --password) holds bytes that are not UTF-8" in said and "Nothing was done." in said
    assert "abc" not in said  # a password is never echoed back
    assert users.find("tom2") is None


@pytest.mark.parametrize("args", [["web", "--port", "99999"], ["web", "--threads", "0"], ["worker", "--processes", "0"],
                                  ["worker", "--processes", "-3"], ["up", "--workers", "0"]])
def test_a_process_count_or_port_out_of_range_is_a_usage_error(app, args):
    # --port 99999 was a traceback (OverflowError); --processes 0 and -3 quietly ran one worker (helper 109).
    result = app.test_cli_runner().invoke(args=args)
    assert result.exit_code == 2 and "is not in the range" in result.output, result.output


def test_a_directory_that_is_not_a_deployment_is_refused_and_left_as_it_was(app, tmp_path):
    # It refused (no tables) but left a new rebound.db and secret_key there, for a later `rebound up` (helper 109).
    elsewhere = tmp_path / "downloads"
    elsewhere.mkdir()
    env = {key: value for key, value in env_for(app).items()
           if key not in ("REBOUND_DATABASE_URL", "REBOUND_SECRET_KEY", "REBOUND_AUDIT_KEY")}
    done = rebound(app, "tenants", "list", env={**env, "REBOUND_DATA_DIR": str(elsewhere)})
    assert done.returncode == 1 and done.stderr.strip().startswith(
        f"Error: {elsewhere} is not a Rebound data dir: it holds no secret_key and no rebound.db"), done.stderr
    assert list(elsewhere.iterdir()) == []
