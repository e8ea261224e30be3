"""Wait for SQLite's write lock in short steps, not with SQLite's own backoff that oversleeps by tens of ms."""

import ctypes
import logging
import sqlite3
import sys
import threading
import time

log = logging.getLogger("rebound.db")

# SQLite's busy_timeout sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms between tries. Web, workers and
# scheduler all write, so a writer that finds the lock taken for 9 ms (its holder preempted on a busy machine)
# sleeps until 18 ms, and a writer already deep in its backoff loses the lock to every newcomer. This looks
# again every STEP_S, so a waiter takes the lock within a step of its release.
STEP_S = 0.0005
TIMEOUT_S = 10.0
_HANDLER_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_waits = threading.local()


def _library():
    """Return the SQLite library the sqlite3 module itself calls (linked in or shared), or None."""
    import _sqlite3  # the extension; its own symbols first, then the libsqlite3 it links

    try:
        library = ctypes.CDLL(_sqlite3.__file__)
        library.sqlite3_busy_handler.argtypes = [ctypes.c_void_p, _HANDLER_TYPE, ctypes.c_void_p]
        library.sqlite3_db_filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        library.sqlite3_db_filename.restype = ctypes.c_char_p
        return library
    except (OSError, AttributeError):
        return None


def _wait(_argument, tries: int) -> int:
    """SQLite's busy callback: sleep one step and try again (1), or give up after TIMEOUT_S (0)."""
    now = time.monotonic()
    if tries == 0:
        _waits.since = now
    elif now - _waits.since >= TIMEOUT_S:
        return 0
    time.sleep(STEP_S)
    return 1


_LIBRARY = _library() if sys.implementation.name == "cpython" else None
_HANDLER = _HANDLER_TYPE(_wait)  # kept here: SQLite holds the pointer for the life of every connection


def _handle(connection: sqlite3.Connection) -> int | None:
    """Return the `sqlite3 *` of a connection, or None where it cannot be found for certain."""
    # CPython's connection object starts with the handle right after the object header (2.6 through 3.13). Reading
    # it is checked: the handle must name the same database file the connection reports.
    if _LIBRARY is None or not isinstance(connection, sqlite3.Connection):
        return None
    pointer = ctypes.c_void_p.from_address(id(connection) + object.__basicsize__).value
    if not pointer:
        return None
    reported = connection.execute("PRAGMA database_list").fetchone()[2]
    named = _LIBRARY.sqlite3_db_filename(pointer, b"main")
    return pointer if named is not None and named.decode() == reported else None


def install(connection: sqlite3.Connection) -> bool:
    """Make this connection wait for locks in short steps; return False if it keeps SQLite's busy_timeout."""
    pointer = _handle(connection)
    if pointer is None:
        log.warning("SQLite busy handler not installed; waiting for locks with busy_timeout's coarse backoff")
        return False
    _LIBRARY.sqlite3_busy_handler(pointer, _HANDLER, None)
    return True
