"""The `rebound` command itself: its version is Rebound's, and its commands are Rebound's."""

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from tests.helpers import env_for


def rebound(app, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], env=env or env_for(app), capture_output=True,
                          text=True, timeout=60)


def test_version_is_rebounds_and_help_lists_no_flask_development_commands(app):
    shown = rebound(app, "--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"rebound {version('rebound')}"
    listed = rebound(app, "--help").stdout
    commands = {line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line.strip()}
    assert {"up", "web", "worker", "scheduler", "set-password", "db"} <= commands
    assert not {"run", "shell", "routes"} & commands  # Flask's development server and tools are not Rebound's


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


def test_db_upgrade_says_which_migrations_it_ran(app, tmp_path):
    env = {**env_for(app), "REBOUND_DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.db'}", "REBOUND_LOG_FORMAT": "text"}
    ran = rebound(app, "db", "upgrade", env=env)
    assert ran.returncode == 0 and "Running upgrade  -> " in ran.stderr, ran.stderr
    assert ran.stderr.count("Running upgrade") == len(list((Path("migrations") / "versions").glob("*.py")))
