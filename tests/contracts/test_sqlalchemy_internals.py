"""What prepared.py reads of SQLAlchemy's compiled statements still means what it assumes, on both dialects; how
submit builds a run object without its constructor."""

import re
from datetime import datetime

import pytest
from sqlalchemy import inspect
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.postgresql import psycopg
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.schema import ColumnDefault

from console.db.prepared import default_value
from console.models import Run
from console.services.engine import submit, transitions

# Byte for byte, the prepared statements store what Core's execute() stores: tests/integration/test_prepared.py.
DIALECTS = [sqlite.dialect(), psycopg.dialect()]  # qmark (positional) and pyformat (named)
GUARDED = transitions._guarded_update(("status", "updated_at", "attempt"))


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda dialect: dialect.name)
def test_a_compiled_insert_lists_its_binds_in_the_order_the_sql_takes_them(dialect):
    compiled = transitions.INSERT_EVENT.compile(dialect=dialect, column_keys=list(transitions.EVENT_COLUMNS))
    columns = re.search(r"\(([^)]*)\) VALUES", compiled.string).group(1).split(", ")
    assert compiled.positional is (dialect.paramstyle == "qmark")
    if compiled.positional:
        # compiled.positiontup: bind names in the order of the ? marks
        assert list(compiled.positiontup) == columns and compiled.string.count("?") == len(columns)
    else:
        # compiled.binds: every name, as the SQL names it
        assert set(compiled.binds) == set(columns)
        assert all(f"%({name})s" in compiled.string for name in columns)
    for name in columns:
        bind = compiled.binds[name]
        assert isinstance(bind, BindParameter)
        # TypeEngine.dialect_impl(...).bind_processor: the driver's JSON adapter comes from psycopg, absent here.
        if dialect.name == "sqlite":
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            assert processor is None or callable(processor)
        else:
            assert callable(bind.type.dialect_impl(dialect).bind_processor)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda dialect: dialect.name)
def test_columns_the_caller_leaves_out_come_as_prefetch_with_their_python_default(dialect):
    # A Prepared statement given fewer columns than the table has (every timeline row now names `executions`; a
    # caller may leave it out): what it leaves out, SQLAlchemy computes from the Python default.
    given = [name for name in transitions.EVENT_COLUMNS if name != "executions"]
    compiled = transitions.INSERT_EVENT.compile(dialect=dialect, column_keys=given)
    left_out = {column.key for column in transitions.EVENTS.c if column.default is not None
                and column.key not in given}
    # compiled.insert_prefetch / update_prefetch: Python-side defaults, computed before the statement runs
    assert {column.key for column in compiled.insert_prefetch} == left_out == {"executions"}
    assert all(isinstance(column.default, ColumnDefault) for column in compiled.insert_prefetch)
    assert GUARDED.statement.compile(dialect=dialect).update_prefetch == []


def test_a_column_default_gives_its_value_scalar_or_called():
    # ColumnDefault.is_scalar and .arg: a callable default is wrapped to take the execution context.
    defaults = {column.key: column.default for column in submit._RUNS.c if column.default is not None}
    assert defaults and all(isinstance(default, ColumnDefault) for default in defaults.values())
    values = {key: default_value(default) for key, default in defaults.items()}
    assert all(value is not None for value in values.values())
    scalar = transitions.EVENTS.c.executions.default
    assert scalar.is_scalar and default_value(scalar) == 0
    called = next(default for default in defaults.values() if not default.is_scalar)
    assert isinstance(default_value(called), datetime | str | dict | int)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda dialect: dialect.name)
def test_a_literal_is_bound_in_the_statement_and_a_bindparam_left_to_the_caller(dialect):
    compiled = submit._WAITING[True].statement.compile(dialect=dialect)
    # BindParameter.required / .value: prepared.py binds the constants (`status IN ('pending', ...)`) itself.
    constants = {bind.value for bind in compiled.binds.values() if not bind.required}
    required = {name for name, bind in compiled.binds.items() if bind.required}
    assert constants == set(submit.WAITING) and required == {"tenant_id", "task_id"}


def test_a_blank_instance_with_its_dict_filled_in_is_a_run_like_the_constructors(app):
    # ClassManager.new_instance() and the instance's __dict__, as the ORM's loader uses them (engine/submit.py).
    row = {"tenant_id": 1, "handler": "python:demo.noop", "status": "pending", "attempt": 0, "series": 1,
           "params": {"n": 1}, "created_at": datetime(2026, 12, 1, 9, 0)}
    built, constructed = submit.new_row_object(Run, row), Run(**row)
    for run in (built, constructed):
        run.id = 7
        make_transient_to_detached(run)
        state = inspect(run)
        # Detached with every given value committed and nothing pending; a column not given is expired (loaded on
        # first read), not None.
        assert state.detached and state.key == (Run, (7,), None) and not state.modified
        assert {key: getattr(run, key) for key in row} == row
        assert "idempotency_key" in state.expired_attributes
        assert state.attrs.params.history.unchanged == [{"n": 1}]
