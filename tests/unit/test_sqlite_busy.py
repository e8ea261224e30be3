"""A writer blocked by another's write lock tries again in short steps, and gives up after the timeout."""

import _sqlite3
import ctypes
import sqlite3
import sys
import threading
import time

import pytest
from sqlalchemy import text

from console import create_app, sqlite_busy
from console.extensions import db
from tests.conftest import make_config


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


def test_the_handler_installs_on_the_python_ci_runs(tmp_path):
    # CI runs this Python: were the handler unavailable here, every writer would fall back to busy_timeout quietly.
    assert sqlite_busy.available(), (f"the SQLite busy handler does not install on {sys.version.split()[0]} "
                                     f"(allowed: {sorted(sqlite_busy.PYTHONS)})")
    connection = sqlite3.connect(tmp_path / "ci.db", factory=sqlite_busy.Connection)
    assert connection.handle and sqlite_busy.install(connection)


def test_each_connection_holds_the_handle_sqlite_opened_for_it(tmp_path):
    filename = ctypes.CDLL(_sqlite3.__file__).sqlite3_db_filename
    filename.argtypes, filename.restype = [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_char_p
    opened = {}

    def open_one(name):
        opened[name] = sqlite3.connect(tmp_path / f"{name}.db", factory=sqlite_busy.Connection,
                                       check_same_thread=False)

    threads = [threading.Thread(target=open_one, args=(name,)) for name in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    opened["here"] = sqlite3.connect(tmp_path / "here.db", factory=sqlite_busy.Connection)
    assert all(connection.handle for connection in opened.values())
    # Safe to ask SQLite about these handles: SQLite itself gave each one while opening that connection.
    assert {name: filename(connection.handle, b"main").decode() for name, connection in opened.items()} == {
        name: str(tmp_path / f"{name}.db") for name in opened}


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
