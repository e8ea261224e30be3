"""A writer blocked by another's write lock tries again in short steps, and gives up after the timeout."""

import sqlite3
import time

import pytest
from sqlalchemy import text

from console import create_app
from console.db import sqlite_busy
from console.extensions import db
from tests.helpers import make_config

pytestmark = pytest.mark.sqlite_only  # SQLite's busy handler: PostgreSQL writers wait on row locks instead


class SleepRecorder:
    """Stands in for the time module inside the busy handler: records each sleep, optionally acts after n of them."""

    def __init__(self, after: int | None = None, then=None):
        self.sleeps: list[float] = []
        self.after, self.then = after, then

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if len(self.sleeps) == self.after:
            self.then()
        time.sleep(seconds)


def _holding_the_write_lock(path) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("CREATE TABLE IF NOT EXISTS notes (body TEXT)")
    holder.execute("BEGIN IMMEDIATE")
    return holder


def _writer(path) -> sqlite3.Connection:
    writer = sqlite3.connect(path, isolation_level=None, factory=sqlite_busy.Connection)
    # Without the handler SQLite's own wait would end the test quickly, not hang it.
    writer.execute("PRAGMA busy_timeout=200")
    return writer


def test_a_blocked_writer_tries_again_in_short_steps_and_writes_once_the_lock_is_free(tmp_path, monkeypatch):
    path = tmp_path / "busy.db"
    holder = _holding_the_write_lock(path)
    recorder = SleepRecorder(after=5, then=holder.commit)
    monkeypatch.setattr(sqlite_busy, "time", recorder)
    writer = _writer(path)
    assert sqlite_busy.install(writer)

    writer.execute("INSERT INTO notes VALUES ('written')")

    assert recorder.sleeps == [sqlite_busy.STEP_S] * 5
    assert holder.execute("SELECT body FROM notes").fetchall() == [("written",)]


def test_a_writer_gives_up_with_database_is_locked_after_the_timeout(tmp_path, monkeypatch):
    path = tmp_path / "busy.db"
    holder = _holding_the_write_lock(path)
    recorder = SleepRecorder()
    monkeypatch.setattr(sqlite_busy, "time", recorder)
    monkeypatch.setattr(sqlite_busy, "TIMEOUT_S", 0.05)
    writer = _writer(path)
    assert sqlite_busy.install(writer)

    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        writer.execute("INSERT INTO notes VALUES ('lost')")

    assert time.monotonic() - started >= 0.05
    assert recorder.sleeps and set(recorder.sleeps) == {sqlite_busy.STEP_S}
    holder.rollback()
    assert holder.execute("SELECT count(*) FROM notes").fetchone() == (0,)


def test_the_consoles_connections_wait_with_the_handler(app, monkeypatch):
    holder = _holding_the_write_lock(app.config["SQLALCHEMY_DATABASE_URI"].removeprefix("sqlite:///"))
    recorder = SleepRecorder(after=3, then=holder.commit)
    monkeypatch.setattr(sqlite_busy, "time", recorder)
    with app.app_context():
        db.session.execute(text("UPDATE tenants SET max_queued = max_queued + 1"))
        db.session.commit()
    assert recorder.sleeps == [sqlite_busy.STEP_S] * 3


def test_an_object_that_is_not_a_sqlite3_connection_keeps_the_default_wait(caplog):
    assert not sqlite_busy.install(object())
    assert "busy handler not installed" in caplog.text


def test_a_closed_connection_is_refused_not_handed_to_sqlite(tmp_path):
    connection = sqlite3.connect(tmp_path / "closed.db", factory=sqlite_busy.Connection)
    connection.close()  # SQLite frees the handle: setting a handler on it would write into freed memory
    assert not sqlite_busy.install(connection)


def test_the_off_switch_leaves_the_consoles_connections_on_busy_timeout(tmp_path, redis_url):
    # SQLite reports busy_timeout 0 once another busy handler replaced its own.
    for switch, kind, timeout in ((True, sqlite_busy.Connection, 0), (False, sqlite3.Connection, 10000)):
        (tmp_path / str(switch)).mkdir()
        app = create_app(make_config(tmp_path / str(switch), redis_url, SQLITE_BUSY_HANDLER=switch))
        with app.app_context():
            connection = db.engine.raw_connection()
            assert type(connection.driver_connection) is kind
            assert connection.execute("PRAGMA busy_timeout").fetchone() == (timeout,)
            connection.close()
            db.engine.dispose()


def test_a_python_not_on_the_list_keeps_busy_timeout_with_a_warning(tmp_path, redis_url, monkeypatch, caplog):
    monkeypatch.setattr(sqlite_busy, "_LIBRARY", None)  # what an unlisted version (or a library without it) gets
    app = create_app(make_config(tmp_path, redis_url))
    with app.app_context():
        connection = db.engine.raw_connection()
        assert type(connection.driver_connection) is sqlite3.Connection
        connection.close()
        db.engine.dispose()
    assert "busy handler not available" in caplog.text
