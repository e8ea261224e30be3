"""Process-wide logging set-up, called by the CLI (never by the app factory)."""

import logging
import os


def configure(level: str | None = None) -> None:
    """Log to stderr with the process name, once per process."""
    logging.basicConfig(
        level=(level or os.environ.get("REBOUND_LOG_LEVEL", "INFO")).upper(),
        format="%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
