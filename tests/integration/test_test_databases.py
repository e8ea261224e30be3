"""The suite's own isolation: each test's database holds the template's rows only, whatever the last test did."""

from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from tests.databases import BACKEND

TENANTS = text("SELECT name FROM tenants ORDER BY name")


def _names(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return [name for (name,) in connection.execute(TENANTS)]
    finally:
        engine.dispose()


def test_a_copy_holds_the_templates_rows_and_the_last_test_loses_its_copy(databases, database_template, tmp_path):
    template_tenants = _names(database_template)
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    with databases.copy(database_template, tmp_path / "first") as first:
        engine = create_engine(first)
        with engine.begin() as connection:  # a test's rows, and one it changed
            connection.execute(text("INSERT INTO tenants (name, max_running, max_queued, created_at) "
                                    "VALUES ('left-behind', 1, 1, CURRENT_TIMESTAMP)"))
            connection.execute(text("UPDATE tenants SET name = 'renamed' WHERE name = 'default'"))
        straggler = engine.connect()  # a connection the test never closed
    with databases.copy(database_template, tmp_path / "second") as second:
        assert _names(second) == template_tenants == ["default"]
    if BACKEND == "postgresql":  # the same database, reused: the first test's address must reach nothing now
        try:
            straggler.execute(text("SELECT 1"))
            raise AssertionError("a connection left open by the last test still reached its database")
        except OperationalError:
            pass
        try:
            _names(first)
            raise AssertionError("the last test's URL still reached the database it had")
        except OperationalError:
            pass
    engine.dispose()
