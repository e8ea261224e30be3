"""Invariant 7 through a database restart, for real: a handler whose outcome could not be written runs once."""

from datetime import timedelta

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.services.engine import reconcile
from tests.helpers import wait_for

pytestmark = pytest.mark.postgresql_only  # a server to take away mid-attempt


def test_a_handler_whose_outcome_could_not_be_written_in_a_restart_is_parked_not_run_again(app, runs, workers,
                                                                                           tmp_path):
    """A PostgreSQL restart under load: four handlers ran twice (the write of their outcome failed, so did the
    cleanup after it; the worker quit and the reconciler retried the runs as worker_lost)."""
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT", pool_size=1)
    run_id = runs.submit("demo.sleep", {"seconds": 1.5})
    worker = workers()
    runs.wait(run_id, "running")
    try:
        with admin.connect() as server:  # the database goes away while the handler sleeps, and stays away
            server.execute(text(f'ALTER DATABASE "{url.database}" WITH ALLOW_CONNECTIONS false'))
            server.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name"),
                           {"name": url.database})
        log = tmp_path / "worker-0.log"
        wait_for(lambda: "cannot be written" in log.read_text(), 30, 0.1, "the worker to keep the outcome in Redis")
    finally:
        with admin.connect() as server:
            server.execute(text(f'ALTER DATABASE "{url.database}" WITH ALLOW_CONNECTIONS true'))
        admin.dispose()
    db.session().invalidate()  # this process's connections were ended too
    db.session.remove()
    db.engine.dispose()
    assert worker.poll() is None  # it went on (it used to quit: "found an unhandled exception, quitting")

    # The database is back; the attempt is silent: the reconciler parks the run with what its worker knew.
    later = FrozenClock(utcnow() + timedelta(minutes=10))
    assert reconcile.reconcile(later).lost_workers == [run_id]
    run = runs.get(run_id)
    assert (run.status, run.status_reason, run.executions) == ("dead", "bookkeeping_failed", 1)
    assert "the handler succeeded" in run.error_message
    assert [event.kind for event in runs.events(run_id)].count("running") == 1
