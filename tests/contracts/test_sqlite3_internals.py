"""What sqlite_busy reaches into in CPython's sqlite3 and its SQLite library still holds, on the Python CI runs."""

import _sqlite3
import ctypes
import sqlite3
import sys
import threading

from console.db import sqlite_busy


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
