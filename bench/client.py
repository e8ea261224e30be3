"""The client's view: runs submitted over HTTP (one by one, and in batches) against bare RQ, in one run.

    .venv/bin/python -m bench.client [--runs 2000] [--threads 4] [--batch 100] [--web-workers 1] [--web-threads 4]

Rebound: `rebound web` (granian, the given processes × threads) and two `rebound worker` processes; the
client's threads POST `/worker/tasks` (or `/worker/tasks/batch`) with a bearer token over kept-alive
connections (http.client by default: the load generator shares the 2 cores, and requests costs 3× its CPU a
call). Bare RQ: two SimpleWorkers; the same number of threads call `Queue.enqueue` (or `enqueue_many` with the
same batch size). One embedded redis-server and one SQLite database for both. Throughput is end to end,
from the first submission to the last finish; latency is submit→succeeded (from the client's clock before it
sends to the run's or job's end) at half the rate just measured. Beside the rates, the machine's CPU per run (every
process, /proc/stat, from the first call until the last finish is seen) and the busy cores it makes over the span: a
figure the VM's load moves less than the rates, and that CPU split by process (the workers, Redis, the web, the
client) to say which side a gap is on. Each figure: the median of --rounds rounds.
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import requests
from rq import Queue
from rq.job import Job

from bench import machine
from bench.engine import BIN, ROOT, UNLIMITED, Bench, percentile
from console.extensions import db
from console.models import Run
from console.processes.ready import wait_until_ready
from console.services.actor import Actor
from console.services.people import tokens, users

BODY = {"handler": "demo.noop", "policy": UNLIMITED}


class Round(NamedTuple):
    """One side's round: rate end to end, submit→succeeded ms per run, rate accepted, and the machine's CPU."""

    rate: float
    ms: list
    accepted: float
    cpu_ms: float  # every process on the machine, per run, from the first call to the last finish seen
    busy_cores: float  # that CPU over the span end to end (a little over: the wait for the last finish)
    by_role: dict  # that CPU per run split by process: the workers, Redis, the web, this process (the client)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def in_threads(threads: int, work) -> None:
    """Run work(thread_index) on each thread and wait for all; re-raise the first error."""
    errors = []

    def guarded(index):
        try:
            work(index)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    pool = [threading.Thread(target=guarded, args=(index,)) for index in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if errors:
        raise errors[0]


def paced(threads: int, total: int, rate: float | None, send) -> dict:
    """Call send(thread's session index, n) for n in 0..total-1 spread over the threads, at `rate` calls/s overall
    (None: as fast as they can); return {n: the client's time just before that call, "accepted_s": from the first
    call to the last answer}."""
    sent, returned = {}, {}
    start = time.perf_counter()
    wall = time.time() - start  # perf_counter → wall clock, for comparing with the end times the workers record

    def work(index):
        for n in range(index, total, threads):
            if rate:
                delay = start + n / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            sent[n] = wall + time.perf_counter()
            send(index, n)
            returned[n] = wall + time.perf_counter()

    in_threads(threads, work)
    sent["accepted_s"] = max(returned.values()) - min(sent.values())
    return sent


class ClientBench:
    def __init__(self, workdir: Path, web_workers: int, web_threads: int, log_level: str = "WARNING",
                 access_log: bool = False, http_client: str = "stdlib"):
        self.core = Bench(workdir)
        with self.core.app.app_context():
            user, _ = users.create("bench-client", "operator", "bench-client-password-1", Actor("bench"))
            _, self.token = tokens.issue(user, Actor("bench"))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**self.core.env, "REBOUND_PORT": str(self.port), "REBOUND_LOG_LEVEL": log_level,
               "REBOUND_ACCESS_LOG": "1" if access_log else "0"}
        # Its lines (the access log at INFO) go to a file, as under a service manager.
        self.web = subprocess.Popen([str(BIN / "rebound"), "web", "--workers", str(web_workers), "--threads",
                                     str(web_threads)], env=env, cwd=ROOT, stdout=(workdir / "web.log").open("w"),
                                    stderr=subprocess.STDOUT)
        wait_until_ready(self.base, 30, alive=lambda: self.web.poll() is None)
        self.http_client = http_client
        self.headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        self.connections: list = []

    def connection(self, index: int):
        """Return client thread `index`'s kept-alive connection: http.client's, or a requests.Session."""
        while len(self.connections) <= index:
            if self.http_client == "requests":
                session = requests.Session()
                session.headers["Authorization"] = self.headers["Authorization"]
                self.connections.append(session)
            else:
                self.connections.append(http.client.HTTPConnection("127.0.0.1", self.port, timeout=60))
        return self.connections[index]

    def post(self, index: int, path: str, body: dict) -> dict:
        if self.http_client == "requests":
            response = self.connection(index).post(self.base + path, json=body, timeout=60)
            status, text = response.status_code, response.content
        else:
            status, text = self._post_stdlib(self.connection(index), path, json.dumps(body))
        if status != 202:
            raise RuntimeError(f"{path}: {status} {text[:300]!r}")
        return json.loads(text)

    def _post_stdlib(self, connection, path: str, body: str) -> tuple[int, bytes]:
        for attempt in (1, 2):
            try:
                connection.request("POST", path, body=body, headers=self.headers)
                response = connection.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # The server closed the kept-alive connection while it sat idle between rounds: open a new one.
                connection.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    # --- Rebound over HTTP ---------------------------------------------------------------------------------------

    def rebound(self, n: int, threads: int, batch: int | None, rate: float | None = None) -> Round:
        """Submit n runs over HTTP while two workers run; runs/s accepted is from the first call to the last answer."""
        with self.core.serving(2):
            ids: dict[int, int] = {}
            calls = n // batch if batch else n
            if batch:
                def send(index, call):
                    answers = self.post(index, "/worker/tasks/batch", {"runs": [BODY] * batch})["runs"]
                    for k, answer in enumerate(answers):
                        ids[call * batch + k] = answer["id"]
            else:
                def send(index, call):
                    ids[call] = self.post(index, "/worker/tasks", BODY)["id"]
            busy, by_process = machine.busy_cpu_seconds(), machine.process_cpu()
            sent = paced(threads, calls, rate / (batch or 1) if rate else None, send)
            finished = dict(self._finished(len(ids)))
            cpu_s = machine.busy_cpu_seconds() - busy
            by_role = machine.cpu_by_role(by_process, machine.process_cpu(), len(ids))
        accepted_s = sent.pop("accepted_s")
        by_call = {k: sent[k // batch if batch else k] for k in ids}
        ms = [(finished[run_id] - by_call[k]) * 1000 for k, run_id in ids.items()]
        span = max(finished.values()) - min(sent.values())
        return Round(len(ids) / span, ms, len(ids) / accepted_s, cpu_s / len(ids) * 1000, cpu_s / span, by_role)

    def _finished(self, n: int) -> list[tuple[int, float]]:
        with self.core.app.app_context():
            deadline = time.monotonic() + 180
            while db.session.query(Run).filter(Run.status != "succeeded").count():
                if time.monotonic() > deadline:
                    raise RuntimeError("runs did not finish within 180 s")
                time.sleep(0.2)
                db.session.commit()
            rows = [(run_id, finished.timestamp()) for run_id, finished in
                    db.session.query(Run.id, Run.finished_at).filter(Run.status == "succeeded")]
            db.session.commit()
        assert len(rows) == n, f"{len(rows)} of {n} runs succeeded"
        return rows

    # --- bare RQ ---------------------------------------------------------------------------------------------

    def bare(self, n: int, threads: int, batch: int | None, rate: float | None = None) -> Round:
        """Enqueue n no-op jobs from `threads` threads while two SimpleWorkers run."""
        self.core.reset()
        queue = Queue("default", connection=self.core.redis)
        procs = self.core.workers([str(BIN / "rq"), "worker", "-q", "-w", "rq.worker.SimpleWorker", "--url",
                                   self.core.redis_url, "default"], 2)
        try:
            self._rq_warm_up(queue)
            jobs: dict[int, str] = {}
            calls = n // batch if batch else n
            if batch:
                def send(index, call):
                    made = queue.enqueue_many([Queue.prepare_data("bench.jobs.noop", result_ttl=600)
                                               for _ in range(batch)])
                    for k, job in enumerate(made):
                        jobs[call * batch + k] = job.id
            else:
                def send(index, call):
                    jobs[call] = queue.enqueue("bench.jobs.noop", result_ttl=600).id
            finished = queue.finished_job_registry
            expected = finished.count + n
            busy, by_process = machine.busy_cpu_seconds(), machine.process_cpu()
            sent = paced(threads, calls, rate / (batch or 1) if rate else None, send)
            deadline = time.monotonic() + 180
            while finished.count < expected:
                if time.monotonic() > deadline:
                    raise RuntimeError("jobs did not finish within 180 s")
                time.sleep(0.2)
            cpu_s = machine.busy_cpu_seconds() - busy
            by_role = machine.cpu_by_role(by_process, machine.process_cpu(), n)
            ended = {job.id: job.ended_at.replace(tzinfo=UTC).timestamp()
                     for job in Job.fetch_many(list(jobs.values()), connection=self.core.redis)}
        finally:
            self.core._stop(procs)
        accepted_s = sent.pop("accepted_s")
        by_call = {k: sent[k // batch if batch else k] for k in jobs}
        ms = [(ended[job_id] - by_call[k]) * 1000 for k, job_id in jobs.items()]
        span = max(ended.values()) - min(sent.values())
        return Round(n / span, ms, n / accepted_s, cpu_s / n * 1000, cpu_s / span, by_role)

    def _rq_warm_up(self, queue: Queue) -> None:
        """Wait until both workers have run a job: measure steady state, not start-up."""
        deadline = time.monotonic() + 60
        while True:
            made = [queue.enqueue("bench.jobs.noop", result_ttl=600) for _ in range(20)]
            time.sleep(0.5)
            done = [job for job in Job.fetch_many([j.id for j in made], connection=self.core.redis) if job]
            if all(job.ended_at for job in done) and len({job.worker_name for job in done}) >= 2:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the RQ workers took no work within 60 s")

    def close(self):
        self.web.terminate()
        self.web.wait(15)
        self.core.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100, help="runs per batch call (0: skip the batch figures)")
    parser.add_argument("--web-workers", type=int, default=1)
    parser.add_argument("--web-threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--probe-seconds", type=float, default=10)
    parser.add_argument("--paths", default="single,batch")
    parser.add_argument("--log-level", default="WARNING", help="REBOUND_LOG_LEVEL of the web process")
    parser.add_argument("--access-log", action="store_true", help="the web writes one access line per request "
                        "(REBOUND_ACCESS_LOG=1)")
    parser.add_argument("--http-client", choices=("stdlib", "requests"), default="stdlib",
                        help="the client threads' HTTP library: http.client (~0.5 ms of CPU a call here) or requests "
                        "(~1.6 ms; bench/http_clients.py), spent on the same 2 cores as the server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench = ClientBench(Path(tmp), args.web_workers, args.web_threads, args.log_level, args.access_log,
                            args.http_client)
        try:
            print(f"{args.runs} no-op runs, {args.threads} client threads, rebound web {args.web_workers} × "
                  f"{args.web_threads} threads, 2 workers each side; client {args.http_client}; "
                  f"{os.cpu_count()} cores; "
                  f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; median of {args.rounds} alternating rounds", flush=True)
            for path in args.paths.split(","):
                batch = args.batch if path == "batch" else None
                if path == "batch" and not batch:
                    continue
                ours, theirs = [], []
                for _ in range(args.rounds):
                    theirs.append(bench.bare(args.runs, args.threads, batch))
                    ours.append(bench.rebound(args.runs, args.threads, batch))
                bare, rebound = (statistics.median(x.rate for x in theirs), statistics.median(x.rate for x in ours))
                taken = (statistics.median(x.accepted for x in theirs), statistics.median(x.accepted for x in ours))
                cpu = (statistics.median(x.cpu_ms for x in theirs), statistics.median(x.cpu_ms for x in ours))
                cores = (statistics.median(x.busy_cores for x in theirs), statistics.median(x.busy_cores for x in ours))
                label = f"batch of {batch}" if batch else "single"
                print(f"{label}, end to end: bare RQ {bare:.0f} jobs/s ({', '.join(f'{x.rate:.0f}' for x in theirs)}), "
                      f"Rebound over HTTP {rebound:.0f} runs/s ({', '.join(f'{x.rate:.0f}' for x in ours)}): "
                      f"ratio {rebound / bare:.2f}", flush=True)
                print(f"{label}, accepted (first call to last answer): bare RQ {taken[0]:.0f}/s, Rebound "
                      f"{taken[1]:.0f}/s: ratio {taken[1] / taken[0]:.2f}", flush=True)
                print(f"{label}, the machine's CPU per run end to end (every process, /proc/stat): bare RQ "
                      f"{cpu[0]:.2f} ms, Rebound {cpu[1]:.2f} ms (ratio of the rates it allows {cpu[0] / cpu[1]:.2f}); "
                      f"busy cores bare RQ {cores[0]:.2f}, Rebound {cores[1]:.2f} of {os.cpu_count()}", flush=True)
                print(f"{label}, that CPU by process (ms per run; 'this process' is the client): bare RQ "
                      f"{machine.describe_roles([x.by_role for x in theirs])}; Rebound "
                      f"{machine.describe_roles([x.by_role for x in ours])}", flush=True)
                for name, measure, rate in (("bare RQ", bench.bare, bare / 2), ("Rebound", bench.rebound, rebound / 2)):
                    n = max(int(rate * args.probe_seconds) // (batch or 1) * (batch or 1), batch or 1)
                    ms = measure(n, args.threads, batch, rate).ms
                    print(f"  {label}, {name} at {rate:.0f}/s (half its rate): submit→succeeded p50 "
                          f"{percentile(ms, 50):.0f} ms, p99 {percentile(ms, 99):.0f} ms, max {max(ms):.0f} ms "
                          f"({len(ms)} runs)", flush=True)
        finally:
            bench.close()


if __name__ == "__main__":
    main()
