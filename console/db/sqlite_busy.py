"""Wait for SQLite's write lock in short steps, not with SQLite's own backoff that oversleeps by tens of ms."""

import atexit
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
# The CPython versions CI runs the tests on, where tests/contracts/test_sqlite3_internals.py fails if the handler
# does not install. Add one only with CI running it: elsewhere connections keep busy_timeout and a warning says so.
PYTHONS = frozenset({(3, 11)})
_HANDLER_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
# SQLite calls each registered auto-extension with the handle of every connection it opens, while opening it.
_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_waits = threading.local()
_opening = threading.local()


def _library():
    """Return the SQLite library the sqlite3 module itself calls (linked in or shared), or None."""
    import _sqlite3  # the extension; its own symbols first, then the libsqlite3 it links

    try:
        library = ctypes.CDLL(_sqlite3.__file__)
        library.sqlite3_busy_handler.argtypes = [ctypes.c_void_p, _HANDLER_TYPE, ctypes.c_void_p]
        library.sqlite3_auto_extension.argtypes = [ctypes.c_void_p]
        library.sqlite3_cancel_auto_extension.argtypes = [ctypes.c_void_p]
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


def _opened(handle, _error_message, _api) -> int:
    """SQLite's auto-extension entry point: note the handle of a connection this thread's Connection opens."""
    handles = getattr(_opening, "handles", None)
    if handles is not None:
        handles.append(handle)
    return 0  # SQLITE_OK: the open goes on


_SUPPORTED = sys.implementation.name == "cpython" and sys.version_info[:2] in PYTHONS
_LIBRARY = _library() if _SUPPORTED else None
_HANDLER = _HANDLER_TYPE(_wait)  # kept here: SQLite holds the pointer for the life of every connection
_ENTRY = _ENTRY_TYPE(_opened)
_entry_registered = False
_registering = threading.Lock()


def available() -> bool:
    """Whether this Python and its SQLite library can take the handler."""
    return _LIBRARY is not None


def _register_entry() -> None:
    global _entry_registered
    with _registering:
        if not _entry_registered:
            entry = ctypes.cast(_ENTRY, ctypes.c_void_p)
            _entry_registered = _LIBRARY.sqlite3_auto_extension(entry) == 0
            if _entry_registered:
                # So SQLite never calls into the callback once the interpreter has freed it at shutdown.
                atexit.register(_LIBRARY.sqlite3_cancel_auto_extension, entry)


class Connection(sqlite3.Connection):
    """A sqlite3 connection that knows its `sqlite3 *` handle, as SQLite itself handed it over while opening it.

    Python's sqlite3 has no API for the handle. Reading it from CPython's object layout would call SQLite on
    whatever word sits there if the layout ever changed; a check such as sqlite3_db_filename on that word is
    itself such a call. Here SQLite gives the handle to a callback during this very open, so it is never a guess.
    """

    handle: int | None = None

    def __init__(self, *args, **kwargs):
        if _LIBRARY is not None:
            _register_entry()
        _opening.handles = []
        try:
            super().__init__(*args, **kwargs)
        finally:
            opened, _opening.handles = _opening.handles, None
        # sqlite3.Connection opens exactly one database here; any other count and the handle is not known.
        self.handle = opened[0] if len(opened) == 1 else None


def init_app(app) -> None:
    """Open the app's SQLite connections as Connection (unless REBOUND_SQLITE_BUSY_HANDLER=0), for install()."""
    if not app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite") or not app.config["SQLITE_BUSY_HANDLER"]:
        return
    if not available():
        log.warning("SQLite busy handler not available on %s %s; waiting for locks with busy_timeout's coarse "
                    "backoff", sys.implementation.name, sys.version.split()[0])
        return
    options = app.config.get("SQLALCHEMY_ENGINE_OPTIONS") or {}
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {
        **options, "connect_args": {**options.get("connect_args", {}), "factory": Connection}}


def install(connection) -> bool:
    """Make this connection wait for locks in short steps; return False if it keeps SQLite's busy_timeout."""
    handle = connection.handle if isinstance(connection, Connection) else None
    if handle is None:
        log.warning("SQLite busy handler not installed; waiting for locks with busy_timeout's coarse backoff")
        return False
    try:
        connection.total_changes  # noqa: B018 - raises on a closed connection, whose handle SQLite has freed
    except sqlite3.ProgrammingError:
        return False
    _LIBRARY.sqlite3_busy_handler(handle, _HANDLER, None)
    return True
