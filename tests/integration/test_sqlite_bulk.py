"""A bulk write's connection: pinned for the block, a 64 MiB page cache on SQLite, as it was afterwards."""

import pytest
from sqlalchemy import text

from console.db import sqlite_bulk
from console.extensions import PINNED, db
from console.models import Tenant


def cache_size(connection) -> int:
    return connection.exec_driver_sql("PRAGMA cache_size").scalar_one()


@pytest.mark.sqlite_only  # PRAGMA cache_size is SQLite's
def test_the_block_runs_on_the_callers_pinned_connection_with_the_bulk_cache_then_the_default_again(app):
    with db.engine.connect() as mine:  # as a worker pins its kept connection for a job
        db.session.info[PINNED] = mine
        try:
            with sqlite_bulk.bulk_writes():
                assert db.session.info[PINNED] is mine
                assert db.session.execute(text("PRAGMA cache_size")).scalar_one() == -sqlite_bulk.BULK_CACHE_KIB
            assert db.session.info[PINNED] is mine and not mine.closed
            assert cache_size(mine) == -sqlite_bulk.DEFAULT_CACHE_KIB
        finally:
            db.session.info.pop(PINNED, None)


@pytest.mark.sqlite_only
def test_unpinned_the_block_holds_one_connection_and_gives_it_back_with_the_default_cache(app):
    with sqlite_bulk.bulk_writes():
        held = db.session.info[PINNED]
        assert cache_size(held) == -sqlite_bulk.BULK_CACHE_KIB
        raw = held.connection.dbapi_connection
    assert PINNED not in db.session.info and held.closed
    assert raw.execute("PRAGMA cache_size").fetchone()[0] == -sqlite_bulk.DEFAULT_CACHE_KIB


def test_the_block_rolls_back_what_it_left_uncommitted_and_leaves_the_session_usable(app):
    from console.models import Tenant

    with sqlite_bulk.bulk_writes():
        db.session.add(Tenant(name="halfway"))
        db.session.flush()
    assert db.session.execute(text("SELECT count(*) FROM tenants WHERE name = 'halfway'")).scalar_one() == 0


def test_a_session_that_already_read_something_can_start_the_block(app):
    db.session.execute(text("SELECT 1 FROM tenants")).all()  # as a request's session has, before a replay starts
    with sqlite_bulk.bulk_writes():
        db.session.add(Tenant(name="inside"))
        db.session.commit()
    assert db.session.execute(text("SELECT count(*) FROM tenants WHERE name = 'inside'")).scalar_one() == 1


def test_a_session_with_unsaved_changes_is_refused_and_keeps_them(app):
    pending = Tenant(name="unsaved")
    db.session.add(pending)
    with pytest.raises(RuntimeError, match="unsaved changes"), sqlite_bulk.bulk_writes():
        pass
    assert pending in db.session.new and PINNED not in db.session.info
    db.session.commit()
    assert db.session.execute(text("SELECT count(*) FROM tenants WHERE name = 'unsaved'")).scalar_one() == 1
