"""Reuse a PostgreSQL test database: put back a template's rows instead of copying the template again.

CREATE DATABASE … TEMPLATE copies every file of the schema (~300 relations) and forces a checkpoint: about a
second per test on two loaded cores, most of the PostgreSQL pass. A database a test has finished with is
instead emptied and refilled with the template's rows (and its sequences set back) in one transaction.
"""

from dataclasses import dataclass

import psycopg
from psycopg import sql

TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
SEQUENCES = "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public' ORDER BY sequencename"


@dataclass(frozen=True)
class Snapshot:
    """A template's rows (COPY's text form, per table) and where its sequences stood."""

    tables: tuple[str, ...]
    rows: dict[str, bytes]
    sequences: dict[str, int | None]


def _conninfo(url) -> str:
    return f"host={url.host} port={url.port} user={url.username} dbname={url.database}"


def take(url) -> Snapshot:
    """Read a database's rows and sequences (a fresh copy of a template: the template itself must stay idle)."""
    with psycopg.connect(_conninfo(url)) as connection:
        tables = tuple(name for (name,) in connection.execute(TABLES))
        rows = {}
        for table in tables:
            with connection.cursor().copy(sql.SQL("COPY {} TO STDOUT").format(sql.Identifier(table))) as copy:
                data = b"".join(bytes(chunk) for chunk in copy)
            if data:
                rows[table] = data
        sequences = dict(connection.execute(SEQUENCES).fetchall())
    return Snapshot(tables, rows, sequences)


def restore(url, snapshot: Snapshot) -> None:
    """Make the database hold exactly the snapshot's rows again, its sequences where they stood, in one transaction.

    Raises ValueError if a test changed the schema (a table added or dropped): then the database is not reused.
    """
    with psycopg.connect(_conninfo(url)) as connection:
        tables = tuple(name for (name,) in connection.execute(TABLES))
        if tables != snapshot.tables:
            raise ValueError(f"the schema changed: {sorted(set(tables) ^ set(snapshot.tables))}")
        # Foreign keys are triggers: the replica role skips them, so tables empty and refill in any order.
        connection.execute("SET LOCAL session_replication_role = replica")
        connection.execute(sql.SQL("; ").join(sql.SQL("DELETE FROM {}").format(sql.Identifier(table))
                                              for table in tables))
        for table, data in snapshot.rows.items():
            with connection.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(table))) as copy:
                copy.write(data)
        if snapshot.sequences:
            connection.execute(sql.SQL("SELECT {}").format(sql.SQL(", ").join(
                sql.SQL("setval({}, {}, {})").format(sql.Literal(name), sql.Literal(value or 1),
                                                     sql.Literal(value is not None))
                for name, value in snapshot.sequences.items())))
