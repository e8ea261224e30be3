"""SQLite settings for one long bulk write: a larger page cache on the one connection it runs on."""

import contextlib

from console.extensions import PINNED, db

# SQLite's default (console/db/sqlite.py leaves it alone), restored on the connection afterwards.
DEFAULT_CACHE_KIB = 2000
# A replay's chunk rewrites index pages spread over the whole runs table; with the default 2 MiB cache each chunk
# read them back from the OS (bulk replay on the 1M-run database, idle: 0.088 -> 0.075-0.080 s of CPU per 1,000).
BULK_CACHE_KIB = 65536


@contextlib.contextmanager
def bulk_writes():
    """Run the block's session on one connection, with a 64 MiB page cache on SQLite; as before afterwards."""
    # Only for the block: the setting is the connection's, and 64 MiB on every pooled connection of every process
    # would be memory spent for reads that do not need it.
    session = db.session()
    previous = session.info.get(PINNED)
    if previous is None:
        # The session may hold a transaction on a pooled connection (a request's reads): end it before pinning
        # another. A caller's unwritten changes would be lost with it, so they are refused, not dropped.
        if session.new or session.dirty or session.deleted:
            raise RuntimeError("bulk_writes() would discard the session's unsaved changes: commit them first")
        session.rollback()
    connection = previous if previous is not None else db.engine.connect()
    sqlite = connection.dialect.name == "sqlite"
    session.info[PINNED] = connection
    try:
        if sqlite:
            _cache(connection, BULK_CACHE_KIB)
        yield
    finally:
        session.rollback()
        if sqlite:
            _cache(connection, DEFAULT_CACHE_KIB)  # shrinking it frees the pages past the new size
        if previous is None:
            session.info.pop(PINNED, None)
            connection.close()


def _cache(connection, kib: int) -> None:
    connection.connection.dbapi_connection.execute(f"PRAGMA cache_size=-{int(kib)}")
