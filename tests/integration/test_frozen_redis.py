"""A Redis that stops answering (SIGSTOP: swapped out, paused, a partition that drops packets) is not a Redis that
refuses connections: without a read timeout every page, submit and scrape that touched it waited until it came back.
These tests freeze a real Redis and time the answers."""

import os
import re
import signal
import time

import pytest
import requests
from sqlalchemy import select

from console import redis_conn
from console.extensions import db
from console.models import Run
from console.processes import embedded_redis
from tests.helpers import PASSWORD
from tests.integration.test_submit_path import token_for
from tests.servers import web_server

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


def test_the_dlq_waits_for_redis_once_and_then_not_at_each_filter_change(client, auth, frozen_redis):
    """Its bulk replays panel and its breaker hints each waited out Redis (6 s a page), and every filter change
    3 s more, in the incident the page is opened for (helper 133)."""
    auth.as_role("operator")
    first, took = timed(lambda: client.get("/dlq/"))
    assert first.status_code == 200 and took < 2 * redis_conn.ANSWER_TIMEOUT_S, took
    assert "Redis is unreachable" in first.get_data(as_text=True)
    for path in ("/dlq/?view=list", "/dlq/?view=list&code=timeout"):
        again, took = timed(lambda path=path: client.get(path, headers={"HX-Request": "true"}))
        assert again.status_code == 200 and took < redis_conn.ANSWER_TIMEOUT_S, (path, took)


def test_a_scrape_waits_once_and_still_serves_the_database_gauges(client, frozen_redis):
    response, took = timed(lambda: client.get("/metrics"))
    assert took < 2 * redis_conn.ANSWER_TIMEOUT_S  # inside Prometheus's default 10 s scrape timeout
    assert response.status_code == 200
    assert "\ndead_letters_open" in response.get_data(as_text=True)


def login(session: requests.Session, base: str, username: str, password: str) -> tuple[int, float]:
    """Log in through the form as a browser does (its CSRF token first); return the answer's status and its time."""
    page = session.get(f"{base}/login", timeout=30).text
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    started = time.monotonic()
    answer = session.post(f"{base}/login", data={"csrf_token": token, "username": username, "password": password},
                          allow_redirects=False, timeout=30)
    return answer.status_code, time.monotonic() - started


def test_logins_while_redis_is_frozen_wait_for_it_once_and_are_still_throttled(tmp_path, migrated_template,
                                                                                databases):
    """A real `rebound web` on a Redis that stops answering: each login waited out Redis twice (two throttle
    checks, 6 s) and every guess went through unthrottled (helper 132). The throttle now counts in the web
    process's memory until Redis answers."""
    url, redis_process = embedded_redis.start(str(tmp_path / "redis"))
    try:
        with web_server(tmp_path / "web", url, migrated_template, databases,
                        REBOUND_LOGIN_RATE_LIMIT="3 per minute") as server:
            assert login(requests.Session(), server.url, "admin", PASSWORD)[0] == 302  # Redis answering
            os.kill(redis_process.pid, signal.SIGSTOP)
            try:
                answers = [login(requests.Session(), server.url, "admin", PASSWORD) for _ in range(4)]
                guesses = [login(requests.Session(), server.url, "mallory", "not-the-password")[0] for _ in range(4)]
            finally:
                os.kill(redis_process.pid, signal.SIGCONT)
    finally:
        redis_process.terminate()
        redis_process.wait(10)
    assert [status for status, _ in answers] == [302] * 4
    # The first waits for the throttle's count and its first look whether Redis is back; the rest count in memory (a
    # look again now and then costs one of them a wait).
    times = sorted(took for _, took in answers)
    assert times[-1] < 2 * redis_conn.THROTTLE_TIMEOUT_S + 1.5, times
    assert times[:2] < [redis_conn.THROTTLE_TIMEOUT_S] * 2, times
    assert guesses == [401, 401, 401, 429]
