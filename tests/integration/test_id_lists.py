"""Many ids as one parameter (console/db/id_lists.py): the same rows as IN, and SQL that does not grow on SQLite."""

import pytest
from sqlalchemy import select

from console.db.id_lists import among, ids_param
from console.extensions import db
from console.models import Run


@pytest.fixture
def run_ids(runs):
    ids = [runs.submit(idempotency_key=f"k{n}") for n in range(6)]
    db.session.commit()
    return ids


def test_among_selects_what_in_selects(app, run_ids):
    dialect = db.engine.dialect.name
    chosen = run_ids[1:5:2] + [10**9]  # an id no run has is simply not found
    by_in = db.session.execute(select(Run.id).where(Run.id.in_(chosen)).order_by(Run.id)).scalars().all()
    by_among = db.session.execute(select(Run.id).where(among(Run.id, chosen, dialect)).order_by(Run.id)).scalars()
    assert list(by_among) == by_in == run_ids[1:5:2]
    assert db.session.execute(select(Run.id).where(among(Run.id, [], dialect))).all() == []


def test_a_named_list_is_given_at_execution(app, run_ids):
    dialect = db.engine.dialect.name
    statement = select(Run.id).where(among(Run.id, ids_param("ids", dialect), dialect)).order_by(Run.id)
    assert db.session.execute(statement, {"ids": run_ids[:2]}).scalars().all() == run_ids[:2]
    assert db.session.execute(statement, {"ids": run_ids[4:]}).scalars().all() == run_ids[4:]


@pytest.mark.sqlite_only
def test_on_sqlite_the_sql_is_the_same_for_three_ids_or_five_thousand(app):
    connection = db.session.connection()

    def sent(ids) -> tuple[str, int]:
        # As executed: an IN list's placeholders are rendered only then, one per id.
        compiled = select(Run.id).where(among(Run.id, ids, "sqlite")).compile(
            connection, compile_kwargs={"render_postcompile": True})
        return str(compiled), len(compiled.params)

    assert sent([1, 2, 3]) == sent(list(range(5000)))
    assert sent([1, 2, 3])[1] == 1
