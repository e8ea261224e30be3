"""The `rebound` command itself: its version is Rebound's, and its commands are Rebound's."""

import subprocess
import sys
from importlib.metadata import version

from tests.helpers import env_for


def rebound(app, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], env=env_for(app), capture_output=True,
                          text=True, timeout=60)


def test_version_is_rebounds_and_help_lists_no_flask_development_commands(app):
    shown = rebound(app, "--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"rebound {version('rebound')}"
    listed = rebound(app, "--help").stdout
    commands = {line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line.strip()}
    assert {"up", "web", "worker", "scheduler", "set-password", "db"} <= commands
    assert not {"run", "shell", "routes"} & commands  # Flask's development server and tools are not Rebound's
