"""`rebound web`'s server (granian): ready on /healthz, graceful stop, access log on demand, no proxy trust."""

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

from console.processes.ready import wait_until_ready
from console.processes.webserver import GRACE_S, server
from tests.helpers import free_port, living_children, process_alive, wait_for


@contextlib.contextmanager
def probe(tmp_path, *flags):
    """Serve tests/web_probe.py's app through console.processes.webserver.serve in a process of its own."""
    port = free_port()
    log_path = tmp_path / "probe.log"
    with log_path.open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "tests.web_probe", str(port), str(tmp_path / "started"),
                                    *flags], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, 60, alive=lambda: process.poll() is None)
        yield type("Probe", (), {"url": url, "port": port, "process": process, "log": log_path})
    finally:  # a graceful stop, so its worker is gone too when the test goes on
        if process.poll() is None:
            process.terminate()
        process.wait(GRACE_S + 5)


def _kept_alive(port: int) -> socket.socket:
    """Return a connection that has had one answer and stays open (HTTP/1.1 keep-alive)."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=5)
    connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n")
    answer = b""
    while not answer.endswith(b'{"status":"ok"}\n'):  # the head and the body may come in separate reads
        answer += connection.recv(4096)
    assert answer.startswith(b"HTTP/1.1 200")
    return connection


def _json_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_sigterm_lets_the_request_in_flight_finish_and_a_kept_alive_connection_does_not_hold_it_up(tmp_path):
    with probe(tmp_path) as web:
        idle = _kept_alive(web.port)
        answers = []
        slow = threading.Thread(target=lambda: answers.append(requests.get(web.url + "/slow", timeout=30)))
        slow.start()
        wait_for(lambda: (tmp_path / "started").exists(), 30, 0.01, "the slow request to start")
        asked = time.monotonic()
        web.process.send_signal(signal.SIGTERM)
        slow.join(30)
        assert web.process.wait(GRACE_S) == 0
        took = time.monotonic() - asked
        [answer] = answers
        assert (answer.status_code, answer.text) == (200, "done")
        # Within the 1.5-s request and well before GRACE_S, when the workers would be killed: the idle kept-alive
        # connection did not hold the stop up (gunicorn's took 2.3 s more with a browser's connections open).
        assert took < GRACE_S / 2, took
        assert idle.recv(4096) == b""  # closed by the server, not left hanging
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", web.port), timeout=1)


def test_sigint_stops_it_too_and_the_worker_sends_its_metric_counts_at_the_end(tmp_path):
    with probe(tmp_path, "--note-flush") as web:
        [worker] = living_children(web.process.pid)
        idle = _kept_alive(web.port)
        asked = time.monotonic()
        web.process.send_signal(signal.SIGINT)
        assert web.process.wait(GRACE_S) == 0
        assert time.monotonic() - asked < GRACE_S / 2
        idle.close()
    # The worker leaves through multiprocessing's exit, which skips atexit (and with it metrics' own flush).
    assert (tmp_path / "started.flushed").read_text() == str(worker)


def test_its_workers_die_with_it_when_it_is_killed(tmp_path):
    with probe(tmp_path) as web:
        [worker] = living_children(web.process.pid)
        web.process.kill()
        web.process.wait(10)
        wait_for(lambda: not process_alive(worker), 30, 0.05, f"the worker {worker} of the killed server to end")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", web.port), timeout=1)


def test_requests_are_logged_as_json_with_secrets_masked_only_when_asked(tmp_path):
    with probe(tmp_path) as web:
        assert requests.get(web.url + "/addr?token=s3cret-in-the-query", timeout=10).status_code == 200
        web.process.send_signal(signal.SIGTERM)
        web.process.wait(GRACE_S)
    lines = _json_lines(tmp_path / "probe.log")
    assert lines and not [line for line in lines if line["logger"] == "granian.access"]
    with probe(tmp_path, "--access-log") as web:
        assert requests.get(web.url + "/addr?token=s3cret-in-the-query", timeout=10).status_code == 200
        # Granian's worker writes its access line after the answer: wait for this request's own (the readiness
        # probe's /healthz line comes first), or a stop on a loaded machine (which may kill the worker) loses it.
        wait_for(lambda: "GET /addr?token=***" in (tmp_path / "probe.log").read_text(), 15, 0.05, "the access line")
        web.process.send_signal(signal.SIGTERM)
        web.process.wait(GRACE_S)
    text = (tmp_path / "probe.log").read_text()
    assert "s3cret-in-the-query" not in text
    [line] = [line for line in _json_lines(tmp_path / "probe.log")
              if line["logger"] == "granian.access" and "/addr" in line["message"]]
    assert line["message"].startswith('127.0.0.1 "GET /addr?token=*** HTTP/1.1" 200 ')


def test_forwarded_headers_are_not_believed_by_the_server(tmp_path):
    with probe(tmp_path) as web:
        seen = requests.get(web.url + "/addr", timeout=10, headers={
            "X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https", "Forwarded": "for=203.0.113.9;proto=https",
            "X-Real-IP": "203.0.113.9"}).json()
    # Only ProxyFix (REBOUND_TRUSTED_PROXIES, tests/integration/test_proxy_and_cookies.py) may believe them.
    assert seen == {"remote_addr": "127.0.0.1", "scheme": "http", "secure": False}


def test_an_oversized_request_head_is_refused_and_the_server_goes_on(tmp_path):
    with probe(tmp_path) as web:
        response = requests.get(web.url + "/addr", headers={"X-Padding": "a" * 300_000}, timeout=10)
        assert response.status_code == 431
        assert requests.get(web.url + "/addr", headers={"X-Padding": "a" * 8_000}, timeout=10).status_code == 200


def test_ready_means_healthz_answers_ok_not_that_the_port_is_open(tmp_path):
    with probe(tmp_path) as web:
        assert wait_until_ready(web.url, 5) == {"status": "ok"}
    with pytest.raises(RuntimeError, match="exited before"):
        wait_until_ready(web.url, 60, alive=lambda: False)
    moments = iter([0.0, 0.1, 99.0])
    with pytest.raises(RuntimeError, match="did not answer ok within 5 s"):
        wait_until_ready(web.url, 5, clock=lambda: next(moments))
    # A port that accepts connections but answers nothing is not ready.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        moments = iter([0.0, 0.1, 99.0])
        with pytest.raises(RuntimeError, match="timed out"):
            wait_until_ready(f"http://127.0.0.1:{silent.getsockname()[1]}", 5, clock=lambda: next(moments))


def test_the_server_takes_its_processes_threads_and_access_log_from_the_app(app):
    quiet = server(app, "127.0.0.1", 8000, workers=2, threads=4)
    assert (quiet.workers, quiet.blocking_threads, quiet.log_access) == (2, 4, False)
    assert quiet.workers_kill_timeout == GRACE_S and quiet.respawn_failed_workers
    app.config["ACCESS_LOG"] = True
    assert server(app, "127.0.0.1", 8000).log_access is True
