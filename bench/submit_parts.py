"""Where one `POST /worker/tasks`'s CPU goes inside the app, part by part, without a profiler's distortion.

    .venv/bin/python -m bench.submit_parts [--requests 2000]

cProfile multiplies the cost of every Python call several times, so its shares overstate Python-heavy parts
against the database's C code. Here each part is a wrapper reading the thread's CPU clock on entry and exit
(about 15 wrappers per request; an empty wrapper's cost is measured and taken off each part); a part's own time
leaves out the parts inside it. The HTTP server's share is not here: it is `bench.submit_cpu --server`'s figure
less this total.
"""

import argparse
import collections
import contextlib
import io
import os
import tempfile
import time
from pathlib import Path

import flask
import flask_login.login_manager
from sqlalchemy.engine import default
from sqlalchemy.orm import Session

from bench.engine import Bench
from bench.submit_cpu import ROUNDS, _environ
from console.api import worker as worker_api
from console.extensions import db
from console.services.actor import Actor
from console.services.engine import submit as submit_module
from console.services.people import tokens, users

clock = time.thread_time


class Parts:
    """CPU seconds per part, each part's own (the parts called inside it taken off)."""

    def __init__(self):
        self.own = collections.Counter()
        self.calls = collections.Counter()
        self.stack: list[list[float]] = []  # [start, time of the parts inside]
        self.overhead = 0.0

    def wrap(self, name: str, function):
        def timed(*args, **kwargs):
            self.stack.append([clock(), 0.0])
            try:
                return function(*args, **kwargs)
            finally:
                started, inner = self.stack.pop()
                spent = clock() - started - self.overhead
                self.own[name] += spent - inner
                self.calls[name] += 1
                if self.stack:
                    self.stack[-1][1] += spent + self.overhead

        return timed

    @contextlib.contextmanager
    def patched(self, targets: list[tuple[object, str, str]]):
        """Wrap each (owner, attribute) under a part's name for the duration."""
        def get(owner, attribute):
            return owner[attribute] if isinstance(owner, dict) else getattr(owner, attribute)

        def put(owner, attribute, value):
            if isinstance(owner, dict):
                owner[attribute] = value
            else:
                setattr(owner, attribute, value)

        saved = [(owner, attribute, get(owner, attribute)) for owner, attribute, _ in targets]
        for owner, attribute, name in targets:
            put(owner, attribute, self.wrap(name, get(owner, attribute)))
        try:
            yield
        finally:
            for owner, attribute, original in saved:
                put(owner, attribute, original)


def _targets(app) -> list[tuple[object, str, str]]:
    return [
        (app, "wsgi_app", "Flask and Werkzeug: request and response objects, context, routing, the rest"),
        (flask_login.login_manager.LoginManager, "_load_user", "token check: Flask-Login around it"),
        (tokens, "authenticate", "token check: the token, user and tenant query (ORM)"),
        (flask.Flask, "preprocess_request", "before_request hooks (Flask-Limiter, CSRF, htmx, …)"),
        (flask.Flask, "process_response", "after_request hooks (headers, session save, …)"),
        (flask.Flask, "do_teardown_request", "teardown hooks (session removal)"),
        (worker_api, "body", "JSON body: parse and depth/surrogate checks"),
        (worker_api, "acting_tenant", "tenant read (ORM)"),
        (worker_api, "jsonify", "JSON answer"),
        (submit_module, "_waiting_and_policy", "submit: waiting counts + quota + policy in one SELECT"),
        (submit_module, "_insert_run", "submit: INSERT run (prepared)"),
        (submit_module.transitions, "event", "submit: INSERT timeline row"),
        (Session, "commit", "submit: commit (SQLAlchemy around it)"),
        (submit_module, "_attach", "submit: attach the run to the session"),
        (submit_module, "enqueue", "submit: Lua enqueue in Redis (client side)"),
        (worker_api, "submit", "submit: checks and the rest"),
        (default.DefaultDialect, "do_execute", "SQLite: executing statements (C)"),
        (default.DefaultDialect, "do_commit", "SQLite: COMMIT (C, WAL write)"),
        (app.view_functions, "worker_api.submit_task", "view and requires(): the rest"),
    ]


def measure(workdir: Path, requests: int) -> tuple[dict, float, int]:
    """Return each part's own CPU µs per request, the whole request's, and the requests measured."""
    bench = Bench(workdir)
    app = bench.app
    with app.app_context():
        user, _ = users.create("bench-cpu", "operator", "bench-cpu-password-1", Actor("bench"))
        _, token = tokens.issue(user, Actor("bench"))
        db.session.remove()
    environ, body = _environ(token)
    statuses = []

    def start_response(status, headers, exc_info=None):
        statuses.append(status)

    def call():
        env = dict(environ)
        env["wsgi.input"] = io.BytesIO(body)
        result = app(env, start_response)
        b"".join(result)
        result.close()

    parts = Parts()
    empty = parts.wrap("calibration", lambda: None)
    started = clock()
    for _ in range(20000):
        empty()
    parts.overhead = (clock() - started) / 20000
    parts.own.clear()
    try:
        for _ in range(200):
            call()
        per_round = requests // ROUNDS
        whole = 0.0
        with parts.patched(_targets(app)):
            for _ in range(ROUNDS):
                bench.reset()
                started = clock()
                for _ in range(per_round):
                    call()
                whole += clock() - started
    finally:
        bench.close()
    assert all(status.startswith("202") for status in statuses), statuses[-1]
    done = per_round * ROUNDS
    return {name: 1e6 * spent / done for name, spent in parts.own.items()}, 1e6 * whole / done, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        parts, whole, done = measure(Path(tmp), args.requests)
    print(f"{done} submits in-process, load before {load}: {whole:.0f} µs of CPU per submit with the wrappers")
    for name, micros in sorted(parts.items(), key=lambda item: -item[1]):
        print(f"  {micros:6.0f} µs  {100 * micros / whole:4.1f} %  {name}")
    print(f"  {whole - sum(parts.values()):6.0f} µs  outside every part (the bench's own call, the wrappers' residue)")


if __name__ == "__main__":
    main()
