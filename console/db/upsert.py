"""INSERT ... ON CONFLICT for the dialect at hand: SQLite and PostgreSQL spell it alike in SQLAlchemy."""

from sqlalchemy.dialects import postgresql, sqlite


def insert_for(connection):
    """Return the dialect's `insert` construct, which has on_conflict_do_nothing / on_conflict_do_update."""
    return postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
