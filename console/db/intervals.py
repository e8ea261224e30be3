"""Seconds between two timestamps in SQL, spelled for each database (SQLite has no interval type)."""

from sqlalchemy import Float
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class seconds_between(FunctionElement):  # noqa: N801 - used like a SQL function
    """`later` minus `earlier`, in seconds (both naive UTC, as UTCDateTime stores them)."""

    type = Float()
    name = "seconds_between"
    inherit_cache = True


@compiles(seconds_between, "sqlite")
def _sqlite(element, compiler, **kw):
    later, earlier = (compiler.process(clause, **kw) for clause in element.clauses)
    return f"((julianday({later}) - julianday({earlier})) * 86400.0)"


@compiles(seconds_between, "postgresql")
def _postgresql(element, compiler, **kw):
    later, earlier = (compiler.process(clause, **kw) for clause in element.clauses)
    return f"EXTRACT(EPOCH FROM ({later}) - ({earlier}))"
