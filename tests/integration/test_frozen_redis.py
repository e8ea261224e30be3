"""A Redis that stops answering (SIGSTOP: swapped out, paused, a partition that drops packets) is not a Redis that
refuses connections: without a read timeout every page, submit and scrape that touched it waited until it came back.
These tests freeze a real Redis and time the answers."""

import os
import signal
import time

import pytest
from sqlalchemy import select

from console import redis_conn
from console.extensions import db
from console.models import Run
from console.processes import embedded_redis
from tests.integration.test_submit_path import token_for

# Redis's side of the story, the same on any database: run once.
pytestmark = pytest.mark.once
# One timed-out command costs ANSWER_TIMEOUT_S. Unbatched metrics (as in tests) cost a submit a second one; `rebound
# web` sends them from a thread.
PATIENCE_S = 3 * redis_conn.ANSWER_TIMEOUT_S


@pytest.fixture
def frozen_redis(app, tmp_path):
    """Point the app at a real Redis with a connection open (as a running console has), then stop the server."""
    url, process = embedded_redis.start(str(tmp_path / "frozen"))
    working = app.extensions["rebound_redis"]
    app.extensions["rebound_redis"] = redis_conn.client(url)
    app.extensions["rebound_redis"].ping()
    os.kill(process.pid, signal.SIGSTOP)
    yield
    os.kill(process.pid, signal.SIGCONT)
    process.terminate()
    process.wait(10)
    app.extensions["rebound_redis"] = working


def timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def test_healthz_says_redis_timed_out_within_the_answer_timeout(client, frozen_redis):
    response, took = timed(lambda: client.get("/healthz"))
    assert response.status_code == 503
    assert response.json["redis"] == "error: TimeoutError" and response.json["database"] == "ok"
    assert took < 2 * redis_conn.ANSWER_TIMEOUT_S


def test_a_submit_is_taken_and_waits_for_the_reconciler(client, auth, frozen_redis):
    _, _, headers = token_for(auth)
    response, took = timed(lambda: client.post("/worker/tasks", json={"handler": "demo.noop"}, headers=headers))
    assert response.status_code == 202, response.json
    assert took < PATIENCE_S
    run = db.session.execute(select(Run).where(Run.id == response.json["id"])).scalar_one()
    assert run.status == "pending"  # in the database; the reconciler queues it once Redis answers


def test_the_pages_that_read_redis_wait_for_it_once(client, auth, frozen_redis):
    auth.as_role("operator")  # the login throttle's own client gives up as soon (RATELIMIT_STORAGE_OPTIONS)
    for path in ("/overview", "/queues/", "/breakers/"):
        response, took = timed(lambda path=path: client.get(path))
        assert response.status_code == 200, path
        assert took < 2 * redis_conn.ANSWER_TIMEOUT_S, (path, took)
        # Each says so, the Overview too (it only showed "Breakers open ?").
        assert "Redis is unreachable" in response.get_data(as_text=True), path


def test_a_scrape_waits_once_and_still_serves_the_database_gauges(client, frozen_redis):
    response, took = timed(lambda: client.get("/metrics"))
    assert took < 2 * redis_conn.ANSWER_TIMEOUT_S  # inside Prometheus's default 10 s scrape timeout
    assert response.status_code == 200
    assert "\ndead_letters_open" in response.get_data(as_text=True)
