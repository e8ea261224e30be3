"""The log lines of status changes, written once their transaction commits; a rollback drops them.

Written at the change, a line said "running → dead" of a write the database then refused: through a database
outage the log told of changes 43 s before they happened, and of some that never did.
"""

import logging

from sqlalchemy import event
from sqlalchemy.orm import Session

_PENDING = "rebound.transition_lines"


def init_app(app) -> None:
    """Write the pending lines when a transaction commits; drop them when it rolls back."""
    if not event.contains(Session, "after_commit", _after_commit):
        event.listen(Session, "after_commit", _after_commit)
        event.listen(Session, "after_rollback", _after_rollback)


def log_at_commit(session, log: logging.Logger, level: int, message: str, *args, extra: dict | None = None) -> None:
    """Log the line once the session's transaction commits."""
    session.info.setdefault(_PENDING, []).append((log, level, message, args, extra))


def _after_commit(session) -> None:
    for log, level, message, args, extra in session.info.pop(_PENDING, ()):
        log.log(level, message, *args, extra=extra)


def _after_rollback(session) -> None:
    session.info.pop(_PENDING, None)
