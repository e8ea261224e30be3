"""Invariant 7 through a database restart, for real: a handler whose outcome could not be written runs once."""

import time

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from console.extensions import db
from tests.helpers import wait_for

pytestmark = pytest.mark.postgresql_only  # a server to take away mid-attempt
RESTART_S = 1.5  # what a PostgreSQL restart took in the walk: 0.5–2 s


def test_a_success_whose_write_met_a_database_restart_is_recorded_when_it_is_back_and_never_run_again(
        app, runs, workers, tmp_path):
    """A PostgreSQL restart under load: four handlers ran twice (the write of their outcome failed, so did the
    cleanup after it; the worker quit and the reconciler retried them), then three successes became dead letters
    (the write was tried three times in 0.3 s, a restart takes 0.5–2 s)."""
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT", pool_size=1)
    run_id = runs.submit("demo.sleep", {"seconds": 1.5})
    worker = workers()
    runs.wait(run_id, "running")
    log = tmp_path / "worker-0.log"
    try:
        with admin.connect() as server:  # the database goes away while the handler sleeps
            server.execute(text(f'ALTER DATABASE "{url.database}" WITH ALLOW_CONNECTIONS false'))
            server.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name"),
                           {"name": url.database})
        wait_for(lambda: "recording the outcome of attempt 1 failed" in log.read_text(), 30, 0.05,
                 "the worker to find the database gone")
        time.sleep(RESTART_S)  # not a wait for a state: how long the server is away
    finally:
        with admin.connect() as server:  # and is back, as after a restart
            server.execute(text(f'ALTER DATABASE "{url.database}" WITH ALLOW_CONNECTIONS true'))
        admin.dispose()
    db.session().invalidate()  # this process's connections were ended too
    db.session.remove()
    db.engine.dispose()

    run = runs.wait(run_id, "succeeded", timeout_s=30)
    assert (run.executions, run.result) == (1, {"slept_s": 1.5})
    assert [event.kind for event in runs.events(run_id)].count("running") == 1
    assert runs.dead_letters(run_id) == []
    assert worker.poll() is None  # it went on (it used to quit: "found an unhandled exception, quitting")
