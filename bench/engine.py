"""Rebound's engine against bare RQ on the same Redis, worker class and process count.

    .venv/bin/python -m bench.engine [--runs 2000] [--mixed 10000] [--probes 1]

Prints runs/s for both and the ratio, draining a backlog and end to end (one client submitting while the
workers drain), submit→succeeded latency at half of Rebound's drain and of its end-to-end throughput (each
measured again just before its probe) beside how steady the machine's CPUs are (bench/machine.py), and a
mixed run (20% retryable failures) checked for duplicates and for delays within policy.
"""

import argparse
import contextlib
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import redis
from rq import Queue
from rq.job import Job

from bench import machine
from console import create_app
from console.domain.policy import RetryPolicy, delay_bounds
from console.extensions import db
from console.models import Run, RunEvent
from console.processes.embedded_redis import start as start_redis
from console.services.actor import Actor
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.system import bootstrap

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
UNLIMITED = {"queue_limit": 1_000_000, "concurrency": 10_000}
TARGET_P99_MS = 100


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


class Bench:
    def __init__(self, workdir: Path, database_url: str | None = None):
        self.workdir = workdir
        self.redis_url, self.redis_process = start_redis(str(workdir / "redis"))
        self.redis = redis.Redis.from_url(self.redis_url)
        self.database_url = database_url or f"sqlite:///{workdir / 'bench.db'}"
        self.app = create_app({"DATA_DIR": str(workdir), "SQLALCHEMY_DATABASE_URI": self.database_url,
                               "REDIS_URL": self.redis_url, "SECRET_KEY": "bench"})
        self.env = {**os.environ, "REBOUND_DATA_DIR": str(workdir), "REBOUND_REDIS_URL": self.redis_url,
                    "REBOUND_DATABASE_URL": self.database_url, "REBOUND_SECRET_KEY": "bench",
                    "REBOUND_LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT)}
        with self.app.app_context():
            db.create_all()
            bootstrap.ensure_ready()
            # The benchmark queues far more than a tenant's default quota allows.
            tenants.find("default").max_queued = 1_000_000
            db.session.commit()
        # This process submits as `rebound web` would, and like it leaves start-up's objects out of collections.
        gc.collect()
        gc.freeze()

    def reset(self):
        self.redis.flushdb()
        with self.app.app_context():
            db.session.execute(db.text("DELETE FROM run_events"))
            db.session.execute(db.text("DELETE FROM dead_letters"))
            db.session.execute(db.text("DELETE FROM outbox"))
            db.session.execute(db.text("DELETE FROM work_orders"))
            db.session.execute(db.text("DELETE FROM runs"))
            db.session.commit()
            # Start each measurement from an empty WAL (or dead tuples vacuumed): the rows deleted here are the
            # benchmark's, not the work's.
            if self.database_url.startswith("sqlite"):
                db.session.execute(db.text("PRAGMA wal_checkpoint(TRUNCATE)"))
            else:
                db.session.commit()
                with db.engine.connect() as connection:
                    connection.execution_options(isolation_level="AUTOCOMMIT").execute(db.text("VACUUM ANALYZE"))

    def workers(self, argv: list[str], count: int) -> list[subprocess.Popen]:
        return [subprocess.Popen(argv, env=self.env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(count)]

    def bare_rq(self, n: int, processes: int, kind: str) -> float:
        """Drain n no-op jobs with bare RQ workers; return jobs/s."""
        self.reset()
        queue = Queue("default", connection=self.redis)
        with self.redis.pipeline() as pipe:
            jobs = [queue.enqueue("bench.jobs.noop", pipeline=pipe, result_ttl=600) for _ in range(n)]
            pipe.execute()
        worker_class = "rq.worker.SimpleWorker" if kind == "simple" else "rq.worker.Worker"
        for p in self.workers([str(BIN / "rq"), "worker", "--burst", "-q", "-w", worker_class, "--url",
                               self.redis_url, "default"], processes):
            p.wait()
        done = [job for job in Job.fetch_many([j.id for j in jobs], connection=self.redis) if job and job.ended_at]
        assert len(done) == n, f"only {len(done)} of {n} jobs finished"
        # From the first job's start to the last one's end: process start-up is not the engine's cost.
        span = max(j.ended_at for j in done) - min(j.started_at for j in done)
        return n / span.total_seconds()

    def rebound(self, n: int, processes: int, kind: str, handler="demo.noop", params=None, policy=UNLIMITED) -> float:
        """Submit n runs, then drain them with Rebound workers; return runs/s of the drain."""
        self.reset()
        with self.app.app_context():
            tenant = tenants.find("default")
            for i in range(n):
                submit(tenant, Actor("bench"), handler=handler, params=params(i) if callable(params) else params,
                       policy=policy)
        for p in self.workers([str(BIN / "rebound"), "worker", "--kind", kind, "--burst"], processes):
            p.wait()
        with self.app.app_context():
            done, first, last = db.session.query(db.func.count(), db.func.min(Run.started_at),
                                                 db.func.max(Run.finished_at)).filter(Run.status == "succeeded").one()
        assert done == n, f"only {done} of {n} runs succeeded"
        return n / (last - first).total_seconds()

    def latency(self, n: int, rate: float, processes: int) -> dict:
        """Submit at a steady rate while workers run; return submit→succeeded percentiles in ms."""
        with self.serving(processes) as tenant:
            start = time.perf_counter()
            for i in range(n):
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                submit(tenant, Actor("bench"), handler="demo.noop", policy=UNLIMITED)
            rows = self._finished(n)
        ms = [(finished - created).total_seconds() * 1000 for created, finished in rows]
        return {"p50": percentile(ms, 50), "p99": percentile(ms, 99), "max": max(ms), "done": len(ms)}

    def rebound_end_to_end(self, n: int, processes: int) -> float:
        """Submit n runs one by one, as fast as one client can, while workers drain; return runs/s end to end.

        The machine's CPU per run meanwhile (this client, the warm workers, Redis, a database server: all of it,
        from /proc/stat) is left in `end_to_end_cpu_ms`: a figure the VM's load moves much less than the rate; and
        split by process (this client's submits, the workers, Redis, PostgreSQL) in `end_to_end_by_role`."""
        with self.serving(processes) as tenant:
            busy, by_process = machine.busy_cpu_seconds(), machine.process_cpu()
            for _ in range(n):
                submit(tenant, Actor("bench"), handler="demo.noop", policy=UNLIMITED)
            rows = self._finished(n)
            self.end_to_end_cpu_ms = (machine.busy_cpu_seconds() - busy) / n * 1000
            self.end_to_end_by_role = machine.cpu_by_role(by_process, machine.process_cpu(), n)
        return n / (max(f for _, f in rows) - min(c for c, _ in rows)).total_seconds()

    def bare_rq_end_to_end(self, n: int, processes: int) -> float:
        """Enqueue n no-op jobs one by one while bare RQ workers drain; return jobs/s end to end."""
        self.reset()
        queue = Queue("default", connection=self.redis)
        procs = self.workers([str(BIN / "rq"), "worker", "-q", "-w", "rq.worker.SimpleWorker", "--url",
                              self.redis_url, "default"], processes)
        try:
            deadline = time.monotonic() + 60
            # As for Rebound's workers: measure once every worker has started and taken work.
            while len({job.worker_name for job in self._enqueue_and_wait(queue, 10 * processes)}) < processes:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"not all {processes} RQ workers took work within 60 s")
            started = datetime.now(UTC)
            jobs = self._enqueue_and_wait(queue, n)
        finally:
            self._stop(procs)
        return n / (max(job.ended_at for job in jobs) - started).total_seconds()

    def _enqueue_and_wait(self, queue: Queue, n: int) -> list[Job]:
        """Enqueue n no-op jobs one call at a time, wait until they have finished; return them with their times."""
        # Polling the finished registry's size, not the jobs: fetching 2,000 job hashes five times a second would
        # take CPU from the workers being measured.
        finished = queue.finished_job_registry
        expected = finished.count + n
        jobs = [queue.enqueue("bench.jobs.noop", result_ttl=600) for _ in range(n)]
        deadline = time.monotonic() + 120
        while finished.count < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{n - expected + finished.count} of {n} jobs finished in 120 s")
            time.sleep(0.2)
        done = [job for job in Job.fetch_many([j.id for j in jobs], connection=self.redis) if job and job.ended_at]
        assert len(done) == n, f"only {len(done)} of {n} jobs have an end time"
        return done

    @contextlib.contextmanager
    def serving(self, processes: int):
        """Run Rebound workers that have each taken work, from an empty database; yield the tenant to submit for."""
        self.reset()
        procs = self.workers([str(BIN / "rebound"), "worker", "--kind", "simple"], processes)
        try:
            with self.app.app_context():
                tenant = tenants.find("default")
                self._warm_up(tenant, processes)
                yield tenant
        finally:
            self._stop(procs)

    def _finished(self, n: int) -> list[tuple]:
        """Wait for the n runs submitted since the warm-up to succeed; return their (created_at, finished_at)."""
        deadline = time.monotonic() + 120
        while db.session.query(Run).filter(Run.status != "succeeded").count() and time.monotonic() < deadline:
            time.sleep(0.2)
            db.session.commit()
        rows = db.session.query(Run.created_at, Run.finished_at).filter(Run.status == "succeeded").all()
        assert len(rows) == n, f"only {len(rows)} of {n} runs succeeded within 120 s"
        return rows

    @staticmethod
    def _stop(procs: list[subprocess.Popen]) -> None:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()

    def _warm_up(self, tenant, processes: int) -> None:
        """Wait until every worker has run work, then forget it: the probe measures steady state, not start-up."""
        # A sleep was not enough: on a busy 2-core machine a worker still starting made the first runs wait 0.25 s.
        deadline = time.monotonic() + 60
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not all {processes} workers took work within 60 s")
            for _ in range(10 * processes):
                submit(tenant, Actor("bench"), handler="demo.noop", policy=UNLIMITED)
            while db.session.query(Run).filter(Run.status != "succeeded").count():
                time.sleep(0.05)
                db.session.commit()
            if db.session.query(db.func.count(db.distinct(Run.worker_id))).scalar() >= processes:
                break
        db.session.execute(db.text("DELETE FROM run_events"))
        db.session.execute(db.text("DELETE FROM runs"))
        db.session.commit()

    def mixed(self, n: int, processes: int) -> dict:
        """n runs, 20% failing once (retryable); check outcomes, duplicates and retry delays."""
        policy = {**UNLIMITED, "max_attempts": 3, "base_delay_s": 1, "multiplier": 2, "jitter": 0.2,
                  "max_delay_s": 10, "breaker": {"failure_threshold": 1000}}
        self.reset()
        with self.app.app_context():
            tenant = tenants.find("default")
            for i in range(n):
                submit(tenant, Actor("bench"), handler="demo.flaky", params={"fail_times": 1 if i % 5 == 0 else 0},
                       policy=policy)
        started = time.perf_counter()
        procs = self.workers([str(BIN / "rebound"), "worker", "--kind", "simple"], processes)
        with self.app.app_context():
            while db.session.query(Run).filter(Run.status.notin_(("succeeded", "dead"))).count():
                time.sleep(0.5)
                db.session.commit()
            elapsed = time.perf_counter() - started
            statuses = dict(db.session.query(Run.status, db.func.count()).group_by(Run.status).all())
            starts = db.session.query(RunEvent.run_id, RunEvent.series, RunEvent.attempt, db.func.count()).filter(
                RunEvent.kind == "running").group_by(RunEvent.run_id, RunEvent.series, RunEvent.attempt).all()
            duplicates = sum(c - 1 for *_, c in starts if c > 1)
            waits = db.session.query(RunEvent).filter(RunEvent.kind == "retry_wait").all()
            low, _, high = delay_bounds(RetryPolicy.from_mapping(policy), 1)
            delays = [(w.next_retry_at - w.at).total_seconds() for w in waits]
            outside = sum(1 for delay in delays if not low - 0.001 <= delay <= high + 0.001)
            started_early = db.session.execute(db.text(
                "SELECT count(*) FROM run_events w JOIN run_events s ON s.run_id = w.run_id AND s.kind = 'running' "
                "AND s.attempt = w.attempt + 1 WHERE w.kind = 'retry_wait' AND s.at < w.next_retry_at")).scalar()
        self._stop(procs)
        return {"runs": n, "seconds": round(elapsed, 1), "statuses": statuses, "retries": len(waits),
                "duplicate_executions": duplicates, "delays_outside_policy": outside,
                "retries_started_early": started_early}

    def close(self):
        self.redis_process.terminate()


def probe(bench: Bench, label: str, measure, seconds: float) -> float:
    """Probe latency at half of a throughput measured just before; print the figures, return the p99 in ms."""
    # Measured again just before: this machine's speed drifts by up to half within minutes, and a rate taken from
    # an earlier, faster moment would probe well above half load.
    rate = measure() / 2
    before = machine.steadiness(1)["median_ms"]
    lat = bench.latency(int(rate * seconds), rate, 2)
    after = machine.steadiness(1)["median_ms"]
    print(f"submit→succeeded at {rate:.0f} runs/s (half of Rebound's 2-process {label} throughput "
          f"measured just before): p50 {lat['p50']:.0f} ms, p99 {lat['p99']:.0f} ms, "
          f"max {lat['max']:.0f} ms ({lat['done']} runs); the machine's unit of work "
          f"{before:.2f} ms before, {after:.2f} ms after", flush=True)
    return lat["p99"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--mixed", type=int, default=10_000)
    parser.add_argument("--kinds", default="simple,fork", help="worker kinds to compare")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    # A p99 over 10 s rests on its 15 slowest runs, often one burst; 30 s gives the percentile some footing.
    parser.add_argument("--probe-seconds", type=float, default=30, help="length of each latency probe")
    parser.add_argument("--probes", type=int, default=1, help="latency probes per throughput, each at a rate "
                        "measured just before it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp))
        try:
            print(f"{args.runs} no-op runs, median of {args.rounds} alternating rounds; same Redis (embedded, "
                  f"unix socket), SQLite WAL; {os.cpu_count()} cores")
            print(f"{'worker':<8} {'procs':>5} {'bare RQ/s':>10} {'Rebound/s':>10} {'ratio':>6}")
            throughput = {}
            for kind in args.kinds.split(","):
                for processes in (1, 2):
                    n = args.runs if kind == "simple" else max(200, args.runs // 4)
                    # Alternate the two in rounds and take medians: this machine's speed drifts between runs.
                    bares, ourses = [], []
                    for _ in range(args.rounds):
                        bares.append(bench.bare_rq(n, processes, kind))
                        ourses.append(bench.rebound(n, processes, kind))
                    bare, ours = statistics.median(bares), statistics.median(ourses)
                    throughput[(kind, processes)] = ours
                    print(f"{kind:<8} {processes:>5} {bare:>10.0f} {ours:>10.0f} {ours / bare:>6.2f}")
            if ("simple", 2) in throughput:  # the latency probe runs the default (simple) workers
                # End to end: one client submits (or enqueues) one at a time while the workers drain, on the same
                # cores, as the console's API and its workers share a machine.
                bares, ourses = [], []
                for _ in range(args.rounds):
                    bares.append(bench.bare_rq_end_to_end(args.runs, 2))
                    ourses.append(bench.rebound_end_to_end(args.runs, 2))
                bare, ours = statistics.median(bares), statistics.median(ourses)
                print(f"end to end, simple ×2: bare RQ {bare:.0f} jobs/s, Rebound {ours:.0f} runs/s, "
                      f"ratio {ours / bare:.2f}")
                # The latency tail follows the machine's hiccups (see bench/machine.py): print them beside it.
                print(machine.describe(machine.steadiness()))
                throughputs = {"drain": lambda: bench.rebound(args.runs, 2, "simple"),
                               "end-to-end": lambda: bench.rebound_end_to_end(args.runs, 2)}
                for label, measure in throughputs.items():
                    p99s = [probe(bench, label, measure, args.probe_seconds) for _ in range(args.probes)]
                    if args.probes > 1:
                        under = sum(p99 < TARGET_P99_MS for p99 in p99s)
                        print(f"at half of the {label} throughput: p99 under {TARGET_P99_MS} ms in {under} of "
                              f"{args.probes} probes ({', '.join(f'{p99:.0f}' for p99 in p99s)} ms)")
            if args.mixed:
                print("mixed:", bench.mixed(args.mixed, 2))
        finally:
            bench.close()


if __name__ == "__main__":
    main()
