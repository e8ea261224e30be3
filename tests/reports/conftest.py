"""Report fixtures: the hand-built history, rolled up, copied for each test that wants it."""

import pytest
import redis

from console.domain.clock import FrozenClock
from console.services.reports import rollup
from tests.reports import history


@pytest.fixture(scope="session")
def history_template(tmp_path_factory, redis_server, databases) -> dict:
    """The history of tests/reports/history.py built and rolled up once per test process, as a template database.

    Built for each test, it took half a second of each of the ~110 tests that read it, on each database."""
    built = {}

    def fill():
        clock = FrozenClock()
        with pytest.MonkeyPatch.context() as monkeypatch:
            built.update(history.build(clock, monkeypatch))
        rollup.tick(clock)

    # Redis as a test gets it, empty (the process's earlier tests wrote to this database: a breaker one of them
    # opened deferred a retry here); the jobs the runs were enqueued as are not kept, as no test runs them.
    redis_url = f"{redis_server}?db=0"
    redis.Redis.from_url(redis_url).flushdb()
    url = databases.template(tmp_path_factory.mktemp("history"), redis_url, fill)
    redis.Redis.from_url(redis_url).flushdb()
    return {"url": url, "ids": built}


@pytest.fixture
def database_template(request, database_template):
    """A test that wants the history starts from a copy of it; the others from the bootstrap rows alone."""
    if "built" in request.fixturenames:
        return request.getfixturevalue("history_template")["url"]
    return database_template


@pytest.fixture
def built(app, clock, history_template) -> dict:
    """The history's ids, in this test's copy of it, with the clock where the history left it."""
    clock.set(history.END)
    return dict(history_template["ids"])
