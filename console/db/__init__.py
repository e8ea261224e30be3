"""Database plumbing: the session, prepared statements, SQLite's pragmas and lock wait, column types."""
