"""First start: "ready" once /healthz answers, quiet logs that name their process, the demo's scheduled tasks."""

import io
import json
import logging
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from console import logs
from console.domain.clock import utcnow
from console.extensions import db
from console.models import Task
from console.processes import ready as ready_module
from console.processes.ready import ReadyNotice
from console.services.scheduling.forecast import forecast
from console.services.system import demo


class _Health(BaseHTTPRequestHandler):
    answer = (503, {"status": "degraded"})

    def do_GET(self):  # noqa: N802 - http.server's name
        status, body = self.answer
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def health():
    server = HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_ready_is_said_once_the_health_check_answers_ok_with_the_password_again(health):
    said = []
    notice = ReadyNotice(f"http://127.0.0.1:{health.server_port}", said.append, "s3cret-first-pass")
    notice()
    assert said == []  # 503: the web answers, but the database or Redis does not yet
    _Health.answer = (200, {"status": "ok"})
    try:
        notice()
        notice()
    finally:
        _Health.answer = (503, {"status": "degraded"})
    [message] = said
    assert f"Rebound is ready: http://127.0.0.1:{health.server_port}" in message
    assert "Log in as 'admin' with password: s3cret-first-pass" in message


def test_ready_without_a_new_admin_says_no_password_and_a_slow_start_is_explained(monkeypatch):
    moments = iter([0.0, 1.0, 61.0, 62.0])
    said = []
    notice = ReadyNotice("http://127.0.0.1:9", said.append, None, timeout_s=0.05, clock=lambda: next(moments))
    notice()
    assert said == []
    notice()
    notice()
    assert len(said) == 1 and "Still starting after 60 s" in said[0]
    assert "password" not in notice.message()
    assert ready_module.SLOW_S == 60.0


def _line(process_name: str | None, monkeypatch, log_format: str = "text") -> str:
    if process_name:
        monkeypatch.setenv(logs.PROCESS_NAME_ENV, process_name)
    stream = io.StringIO()
    logger = logging.getLogger("rebound.test.first_start")
    logger.propagate = False
    logger.addHandler(logs.handler(log_format, stream))
    try:
        logger.warning("run 7: pending → running, password=hunter2hunter2")
    finally:
        logger.handlers.clear()
    return stream.getvalue()


def test_each_line_names_its_process_not_main_process(monkeypatch):
    text = _line("worker-1", monkeypatch)
    assert " worker-1 rebound.test.first_start: run 7" in text and "MainProcess" not in text
    assert "hunter2" not in text
    assert json.loads(_line("scheduler", monkeypatch, "json"))["process"] == "scheduler"


def test_rq_says_its_per_job_lines_only_at_debug():
    root = logging.getLogger()
    level = root.level
    try:
        root.setLevel(logging.INFO)
        assert logs.rq_level() == logging.WARNING
        root.setLevel(logging.DEBUG)
        assert logs.rq_level() == logging.DEBUG
    finally:
        root.setLevel(level)


def test_the_access_log_setting(monkeypatch):
    from console.config import from_env

    assert from_env({})["ACCESS_LOG"] is False
    assert from_env({"REBOUND_ACCESS_LOG": "1"})["ACCESS_LOG"] is True
    assert from_env({"REBOUND_LOG_LEVEL": "debug"})["ACCESS_LOG"] is True
    # "off" turned it on: anything but 0, false or no did (helper 118).
    assert from_env({"REBOUND_ACCESS_LOG": "off"})["ACCESS_LOG"] is False
    assert from_env({"REBOUND_SQLITE_BUSY_HANDLER": "off"})["SQLITE_BUSY_HANDLER"] is False


def test_the_demo_seeds_scheduled_tasks_that_show_a_mutex_overlap_and_a_window_deferral(app):
    demo.seed()
    crons = {task.name: task.cron for task in db.session.query(Task)}
    assert crons == {"heartbeat-ping": "* * * * *", "nightly-ledger-close": "30 23 * * *",
                     "export-orders": "*/15 * * * *", "reindex-orders": "*/30 * * * *"}
    result = forecast(utcnow(), 24)
    assert result.firings >= 1440 + 96 + 48
    assert {o["mutex_key"] for o in result.mutex_overlaps} == {"orders-db"}
    [deferral] = {o["task"] for o in result.outside_window}
    assert deferral == "nightly-ledger-close"
    assert timedelta(hours=24) == result.end - result.start
