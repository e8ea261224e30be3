"""CPU per `POST /worker/tasks`: in-process through the WSGI app, and inside a real `rebound web`.

    .venv/bin/python -m bench.submit_cpu [--requests 2000] [--profile submit.prof]
    .venv/bin/python -m bench.submit_cpu --server [--setups 1x8,2x4] [--against ../main] [--threads 4]

CPU time, not wall time, so the figure holds on a machine other work shares. In-process: the app is called as a
WSGI server calls it, with the body bench.client sends and a bearer token, and time.process_time() is read around
the requests (Redis runs in its own process and is not counted; no workers run, so the runs and jobs are deleted
between rounds).
--profile writes cProfile's stats of the same loop. --server: one `rebound web` per setup (and per setup again
from the checkout --against names, for a before/after) serves --threads client threads over kept-alive connections,
all started at once and sent rounds in turn, so each meets the same load from the rest of the machine; the CPU its
processes used in a round (the server's main process and its workers, from /proc) is divided by the round's
requests: HTTP parsing, the server's threads and the app together. --against a checkout from before the switch to
granian (docs/architecture.md) serves it with gunicorn, if the venv still has gunicorn installed.
"""

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import requests
from sqlalchemy import event
from werkzeug.test import EnvironBuilder

from bench.client import BODY, free_port, in_threads
from bench.engine import BIN, ROOT, Bench
from console.extensions import db
from console.processes.ready import wait_until_ready
from console.services.actor import Actor
from console.services.people import tokens, users

# The CPU time of a round is the figure; the least of several is the one least disturbed by other processes (a
# busy machine evicts caches and takes cycles a process is still charged for).
ROUNDS = 5


def _environ(token: str) -> tuple[dict, bytes]:
    """Return the environ of one submit (less its body stream) and the body, as a WSGI server would pass them."""
    import json

    body = json.dumps(BODY).encode()
    builder = EnvironBuilder(path="/worker/tasks", method="POST", data=body, content_type="application/json",
                             headers={"Authorization": f"Bearer {token}", "User-Agent": "python-requests/2.34"})
    environ = builder.get_environ()
    environ["REMOTE_ADDR"] = "127.0.0.1"
    return environ, body


def submitter(workdir: Path):
    """Return a bench over a fresh database, a call that POSTs one run to its app in-process, and the statuses seen."""
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
        try:
            b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()

    return bench, call, statuses


def in_process(workdir: Path, requests: int, profile: str | None) -> dict:
    """Call the app `requests` times in rounds; return the least and the median CPU ms per request of a round."""
    bench, call, statuses = submitter(workdir)
    app = bench.app
    try:
        for _ in range(200):
            call()
        statuses.clear()
        if profile:
            bench.reset()
            profiler = cProfile.Profile(time.process_time)
            profiler.enable()
            for _ in range(requests):
                call()
            profiler.disable()
            profiler.dump_stats(profile)
        rounds, system = [], []
        for _ in range(ROUNDS):
            # No worker takes the runs: empty the tables and the queue between rounds, so the count of waiting runs
            # each submit makes stays as small as under workers that keep up.
            bench.reset()
            started, times = time.process_time(), os.times()
            for _ in range(requests // ROUNDS):
                call()
            rounds.append(1000 * (time.process_time() - started) / (requests // ROUNDS))
            system.append(1000 * (os.times().system - times.system) / (requests // ROUNDS))
        calls, statements = _count(app, call)
    finally:
        bench.close()
    bad = [status for status in statuses if not status.startswith("202")]
    assert not bad, f"{len(bad)} requests answered {bad[0]}"
    return {"requests": requests, "min_ms": min(rounds), "median_ms": statistics.median(rounds), "calls": calls,
            "system_ms": system[rounds.index(min(rounds))],
            "statements": statements}


def _count(app, call, n: int = 100) -> tuple[float, float]:
    """Return the Python function calls and the SQL statements of one request: figures no other process moves."""
    statements = []
    with app.app_context():
        engine = db.engine

    def counted(*args):
        statements.append(args[2])

    event.listen(engine, "before_cursor_execute", counted)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        call()
    profiler.disable()
    event.remove(engine, "before_cursor_execute", counted)
    return pstats.Stats(profiler).total_calls / n, len(statements) / n


def _cpu_seconds(pid: int) -> float:
    """Return the user + system CPU seconds of a process and its children still running."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state, ppid, ... utime is field 14 and stime 15 of the whole line.
        if int(entry) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


class Web:
    """One `rebound web` on the bench's database and Redis, served from the code in `root`."""

    def __init__(self, core: Bench, root: Path, workers: int, threads: int, label: str):
        self.label, self.port = label, free_port()
        env = {**core.env, "REBOUND_PORT": str(self.port), "PYTHONPATH": str(root)}
        log = (core.workdir / f"web-{self.port}.log").open("w")
        command = [str(BIN / "rebound"), "web", "--workers", str(workers), "--threads", str(threads)]
        self.process = subprocess.Popen(command, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT)
        self.sessions: dict[int, requests.Session] = {}
        self.rounds: list[float] = []
        try:
            wait_until_ready(f"http://127.0.0.1:{self.port}", 30, alive=lambda: self.process.poll() is None)
        except RuntimeError as error:
            raise RuntimeError(f"rebound web ({label}) did not start: {error}") from None

    def post(self, index: int, token: str) -> None:
        session = self.sessions.get(index)
        if session is None:
            session = self.sessions[index] = requests.Session()
            session.headers["Authorization"] = f"Bearer {token}"
        try:
            response = session.post(f"http://127.0.0.1:{self.port}/worker/tasks", json=BODY, timeout=60)
        except requests.ConnectionError:
            # The server closed the kept-alive connection as it sat idle through the other servers' turns, just as
            # this call went out: send it again on a fresh one.
            session.close()
            response = session.post(f"http://127.0.0.1:{self.port}/worker/tasks", json=BODY, timeout=60)
        if response.status_code != 202:
            raise RuntimeError(f"{self.label}: {response.status_code} {response.text[:300]}")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(15)


def served(workdir: Path, requests_: int, threads: int, setups: list[tuple[int, int]], against: Path | None,
           rounds: int) -> list[Web]:
    """Start one `rebound web` per setup (and per setup again from `against`), all at once; send `requests_` submits
    to each in rounds that take turns, so every server sees the same load from the rest of the machine; return the
    servers with their CPU ms per submit of each round."""
    core = Bench(workdir)
    with core.app.app_context():
        user, _ = users.create("bench-cpu", "operator", "bench-cpu-password-1", Actor("bench"))
        _, token = tokens.issue(user, Actor("bench"))
        db.session.remove()
    roots = [(ROOT, "")] + ([(against, f" from {against}")] if against else [])
    webs = []
    try:
        for workers, web_threads in setups:
            for root, where in roots:
                webs.append(Web(core, root, workers, web_threads, f"{workers} × {web_threads}{where}"))
        per_round = max(threads, requests_ // rounds)
        for web in webs:
            for n in range(200):  # warm up every process and thread
                web.post(n % threads, token)
        for _ in range(rounds):
            for web in webs:
                core.reset()

                def work(index, web=web):
                    for _ in range(index, per_round, threads):
                        web.post(index, token)

                before = _cpu_seconds(web.process.pid)
                in_threads(threads, work)
                web.rounds.append(1000 * (_cpu_seconds(web.process.pid) - before) / per_round)
    finally:
        for web in webs:
            web.close()
        core.close()
    return webs


def _setup(text: str) -> tuple[int, int]:
    """Read `1x8` as (processes, threads)."""
    workers, threads = (int(n) for n in text.split("x"))
    return workers, threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="submits (per server with --server)")
    parser.add_argument("--profile", help="write cProfile stats of the in-process loop to this file")
    parser.add_argument("--server", action="store_true", help="measure real `rebound web` processes instead")
    parser.add_argument("--threads", type=int, default=4, help="client threads (--server)")
    parser.add_argument("--setups", default="1x8", help="processes x threads to compare, e.g. 1x8,2x4")
    parser.add_argument("--against", type=Path, help="serve each setup from this checkout too (before/after)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds per server (--server)")
    args = parser.parse_args()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        if args.server:
            setups = [_setup(setup) for setup in args.setups.split(",")]
            webs = served(Path(tmp), args.requests, args.threads, setups, args.against, args.rounds)
            print(f"{args.threads} client threads, {args.rounds} rounds per server taking turns; load before {load}, "
                  f"after {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
            for web in webs:
                print(f"  rebound web {web.label}: {statistics.median(web.rounds):.3f} ms of the web's CPU per submit "
                      f"(median of the rounds; least {min(web.rounds):.3f}, most {max(web.rounds):.3f})")
        else:
            result = in_process(Path(tmp), args.requests, args.profile)
            print(f"in-process: {result['min_ms']:.3f} ms CPU per submit (least of {ROUNDS} rounds; median "
                  f"{result['median_ms']:.3f} ms; of the least, {result['system_ms']:.3f} ms in the kernel; "
                  f"{result['requests']} requests; load before {load}); "
                  f"{result['calls']:.0f} Python calls and {result['statements']:.0f} SQL statements per submit")


if __name__ == "__main__":
    main()
