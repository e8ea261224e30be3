"""What PinnableSession overrides in Flask-SQLAlchemy's session still takes the arguments and effect it assumes."""

import inspect

from flask_sqlalchemy.session import Session
from sqlalchemy import text

from console.extensions import PINNED, PinnableSession, db


def test_get_bind_keeps_the_signature_pinnable_session_overrides():
    assert [(parameter.name, parameter.default) for parameter in
            inspect.signature(Session.get_bind).parameters.values()] == [
        ("self", inspect.Parameter.empty), ("mapper", None), ("clause", None), ("bind", None),
        ("kwargs", inspect.Parameter.empty)]
    assert PinnableSession.__mro__[1] is Session


def test_a_pinned_session_runs_its_statements_and_commits_on_the_pinned_connection(app):
    with db.engine.connect() as pinned:
        session = db.session()
        session.info[PINNED] = pinned
        try:
            assert session.connection() is pinned
            session.execute(text("UPDATE tenants SET max_queued = max_queued + 1"))
            session.commit()
            assert not pinned.in_transaction()  # the session's commit was the pinned connection's
        finally:
            session.info.pop(PINNED)
            db.session.remove()
