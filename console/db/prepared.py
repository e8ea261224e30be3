"""Hot-path statements compiled once per dialect and run as driver SQL, with their parameters bound by name."""

from dataclasses import dataclass

from sqlalchemy.engine import Connection, CursorResult


@dataclass(frozen=True)
class _Form:
    sql: str
    names: tuple[str, ...]
    processors: tuple  # per name: the column type's bind processor, or None
    positional: bool
    defaults: dict  # name -> the column's Python-side default, for values the caller leaves out
    constants: dict  # name -> a value bound in the statement itself (`status IN ('pending', ...)`)


class Prepared:
    """One statement whose SQL and type conversions are worked out once per dialect, not on every execution.

    SQLAlchemy's execute() re-derives, per call, what a statement that never changes already knows (its
    compiled form from a cache, the parameter set, each value's processor): on a 16-column INSERT that was
    four times SQLite's own work. This keeps SQLAlchemy's SQL, types and transaction; only the per-call
    bookkeeping is skipped.
    """

    def __init__(self, statement, column_keys: tuple[str, ...] | None = None):
        self.statement = statement
        self.column_keys = column_keys
        self._forms: dict[tuple[str, str], _Form] = {}

    def _form(self, dialect) -> _Form:
        key = (dialect.name, dialect.paramstyle)
        form = self._forms.get(key)
        if form is None:
            compiled = self.statement.compile(
                dialect=dialect, column_keys=list(self.column_keys) if self.column_keys else None)
            names = tuple(compiled.positiontup) if compiled.positional else tuple(compiled.binds)
            # dialect_impl: a generic type (DateTime) converts nothing; the dialect's own (SQLite's DATETIME) does.
            processors = tuple(compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect)
                               for name in names)
            defaults = {column.key: column.default if column.default is not None else column.onupdate
                        for column in (*compiled.insert_prefetch, *compiled.update_prefetch)}
            constants = {name: bind.value for name, bind in compiled.binds.items()
                         if name in names and not bind.required and name not in defaults}
            form = self._forms[key] = _Form(compiled.string, names, processors, compiled.positional, defaults,
                                            constants)
        return form

    def execute(self, connection: Connection, params: dict) -> CursorResult:
        """Run the statement in the connection's transaction with these values (by bind name)."""
        form = self._form(connection.dialect)
        if form.constants or form.defaults.keys() - params.keys():
            params = {**form.constants, **{name: default_value(default) for name, default in form.defaults.items()},
                      **params}
        values = [params[name] if processor is None else processor(params[name])
                  for name, processor in zip(form.names, form.processors, strict=True)]
        return connection.exec_driver_sql(form.sql, tuple(values) if form.positional
                                          else dict(zip(form.names, values, strict=True)))


    def execute_many(self, connection: Connection, shared: dict, rows: list[dict],
                     encoded: frozenset = frozenset()) -> None:
        """Run the statement once per row (one executemany): `shared` values are converted once for all rows, each
        row gives the rest; values named in `encoded` are already in the driver's form (JSON text, say)."""
        form = self._form(connection.dialect)
        base, varying = [], []
        for index, (name, processor) in enumerate(zip(form.names, form.processors, strict=True)):
            processor = None if name in encoded else processor
            if name in shared or name in form.constants:
                value = shared[name] if name in shared else form.constants[name]
                base.append(value if processor is None else processor(value))
            else:
                base.append(None)
                varying.append((index, name, processor))
        batch = []
        for row in rows:
            values = base.copy()
            for index, name, processor in varying:
                values[index] = row[name] if processor is None else processor(row[name])
            batch.append(tuple(values) if form.positional else dict(zip(form.names, values, strict=True)))
        if batch:
            connection.exec_driver_sql(form.sql, batch)


def default_value(default):
    """Return a column's Python-side default value (a callable one is called)."""
    # SQLAlchemy wraps a callable default to take the execution context; the ones used here ignore it.
    return default.arg if default.is_scalar else default.arg(None)
