"""The worker's CPU per attempt: a Rebound worker process against bare RQ's SimpleWorker on the same no-op jobs.

    .venv/bin/python -m bench.worker_cpu [--runs 2000] [--rounds 3] [--databases sqlite,postgresql]
    .venv/bin/python -m bench.worker_cpu --runs 2000 --rounds 1 --profile /tmp/worker.prof   # cProfile the worker
    .venv/bin/python -m bench.worker_cpu --runs 2000 --rounds 1 --profile /tmp/worker.txt    # py-spy's samples

Jobs are queued first; then one worker process drains them in burst mode. The worker process times its own work
loop with `time.process_time()` (every thread of the process, from the loop's start to its end: start-up and
imports are left out, RQ's registration and the loop's own housekeeping are in). Beside it, the CPU the servers
spent meanwhile (/proc): Redis, and PostgreSQL's processes, and how often PostgreSQL flushed its WAL to the disk
(`pg_stat_wal.wal_sync`: a commit that waits for the disk asks one). Rounds alternate bare RQ and Rebound; medians are
printed. CPU time moves much less with the machine's load than throughput does, so this is the figure to compare
across runs; it still moves with the VM's speed (bench/machine.py), so compare within one run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rq import Queue
from sqlalchemy import text

from bench.engine import BIN, ROOT, UNLIMITED, Bench
from console.extensions import db
from console.models import Run
from console.services.actor import Actor
from console.services.engine.submit import submit
from console.services.people import tenants

TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int, *, children: bool = False) -> float:
    """Return a process's CPU seconds from /proc (user + system), with its reaped children's if asked."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    used = int(fields[11]) + int(fields[12])
    if children:
        used += int(fields[13]) + int(fields[14])
    return used / TICKS


def tree_cpu(root: int) -> float:
    """Return the CPU seconds of a process, its reaped children and its live children (a PostgreSQL cluster)."""
    total = process_cpu(root, children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == root:
                    total += (int(stat[11]) + int(stat[12])) / TICKS
            except (FileNotFoundError, ProcessLookupError):
                pass
    return total


class Servers:
    """The CPU the servers a bench talks to spend: its Redis, and PostgreSQL's cluster if it has one."""

    def __init__(self, bench: Bench, postmaster: int | None):
        self.bench = bench
        self.redis_pid = bench.redis_process.pid if bench.redis_process else None
        self.postmaster = postmaster

    def redis(self) -> float:
        return process_cpu(self.redis_pid) if self.redis_pid else 0.0

    def database(self) -> float:
        return tree_cpu(self.postmaster) if self.postmaster else 0.0

    def wal_syncs(self) -> int:
        """Return how many times PostgreSQL has made its WAL durable (an fsync each; a commit that waits asks one)."""
        if not self.postmaster:
            return 0
        with self.bench.app.app_context():
            syncs = db.session.execute(text("SELECT wal_sync FROM pg_stat_wal")).scalar_one()
            db.session.commit()  # the statistics are read afresh in each transaction
            return syncs


def child(kind: str, profile: str | None, phases: bool = False) -> None:
    """Drain the queue in burst mode inside this process and print the work loop's CPU seconds as JSON."""
    import gc
    import logging

    if kind == "rq":
        import redis
        from rq.worker import SimpleWorker

        worker = SimpleWorker(["default"], connection=redis.Redis.from_url(os.environ["REBOUND_REDIS_URL"]))
        run = lambda: worker.work(burst=True, logging_level="WARNING")  # noqa: E731 - `rq worker -q`
    else:
        from console import create_app
        from console.commands.processes import _start_process
        from console.logs import rq_level
        from console.processes.worker import build_worker
        from console.redis_conn import get_redis

        app = create_app()
        context = app.app_context()
        context.push()
        _start_process()
        worker = build_worker(app, get_redis(), "simple")
        run = lambda: worker.work(with_scheduler=True, burst=True, logging_level=rq_level())  # noqa: E731
    if phases:
        from bench import phases as timing

        timing.install(kind == "rebound")
    gc.collect()
    gc.freeze()  # as `rebound worker` does; bare RQ gains from it too
    logging.getLogger().setLevel(logging.WARNING)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)  # CPU, not waiting
        profiler.enable()
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    if phases:
        print("\n".join(timing.report(int(os.environ["BENCH_JOBS"]))), file=sys.stderr)
    print(json.dumps({"cpu": cpu, "wall": wall}))


class Measure:
    """Queue no-op jobs, drain them with worker processes side by side, and say what each job cost."""

    def __init__(self, bench: Bench, servers: Servers, jobs: int, phases: bool = False, workers: int = 1):
        self.bench, self.servers, self.jobs, self.phases, self.workers = bench, servers, jobs, phases, workers

    def _drain(self, kind: str, profile: str | None = None) -> dict:
        redis_before, db_before, syncs_before = self.servers.redis(), self.servers.database(), self.servers.wal_syncs()
        children = [subprocess.Popen(self._argv(kind, profile, number), env={**self.bench.env,
                                     "BENCH_JOBS": str(self.jobs)}, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True) for number in range(self.workers)]
        answers = [child.communicate() for child in children]
        for child, (_out, err) in zip(children, answers, strict=True):
            if child.returncode:
                raise SystemExit(f"a {kind} worker failed:\n{err}")
        if self.phases:
            print(f"{kind}, CPU of the worker's main thread per job, by phase (phases nest):")
            print(answers[0][1].strip())
        time.sleep(0.2)  # let PostgreSQL reap the worker's backends, so their CPU shows in the postmaster's
        each = [json.loads([line for line in out.splitlines() if line.startswith("{")][-1]) for out, _ in answers]
        # The workers drain one queue side by side: their CPU adds up; the drain lasts as long as the slowest.
        figures = {"cpu": sum(one["cpu"] for one in each), "wall": max(one["wall"] for one in each)}
        figures["redis"] = self.servers.redis() - redis_before
        figures["database"] = self.servers.database() - db_before
        figures["wal syncs"] = self.servers.wal_syncs() - syncs_before
        return figures

    def _argv(self, kind: str, profile: str | None, number: int) -> list[str]:
        argv = [sys.executable, "-m", "bench.worker_cpu", "--child", kind]
        if profile and self.workers > 1:
            profile = f"{profile}.{number}" if not profile.endswith(".txt") else f"{profile[:-4]}.{number}.txt"
        if profile and profile.endswith(".txt"):
            # Sampled by py-spy (not a dependency: `pip install py-spy`): collapsed stacks, no tracing overhead.
            argv = [str(BIN / "py-spy"), "record", "--nonblocking", "-r", "1000", "-f", "raw", "-o", profile, "--",
                    *argv]
        elif profile:
            argv += ["--profile", profile]
        if self.phases:
            argv.append("--phases")
        return argv

    def bare_rq(self, n: int) -> dict:
        self.bench.reset()
        queue = Queue("default", connection=self.bench.redis)
        with self.bench.redis.pipeline() as pipe:
            for _ in range(n):
                queue.enqueue("bench.jobs.noop", pipeline=pipe, result_ttl=600)
            pipe.execute()
        figures = self._drain("rq")
        assert queue.finished_job_registry.count == n, "not every bare RQ job finished"
        return figures

    def rebound(self, n: int, profile: str | None = None) -> dict:
        self.bench.reset()
        with self.bench.app.app_context():
            tenant = tenants.find("default")
            for _ in range(n):
                submit(tenant, Actor("bench"), handler="demo.noop", policy=UNLIMITED)
        figures = self._drain("rebound", profile)
        with self.bench.app.app_context():
            done = db.session.query(db.func.count()).filter(Run.status == "succeeded").scalar()
        assert done == n, f"only {done} of {n} runs succeeded"
        return figures


def _per_job_ms(rounds: list[dict], key: str, n: int) -> float:
    return statistics.median(figures[key] for figures in rounds) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    parser.add_argument("--databases", default="sqlite", help="sqlite, postgresql or both (comma-separated)")
    parser.add_argument("--profile", help="profile the Rebound worker of the last round into this file: "
                        "cProfile's stats, or py-spy's collapsed stacks if it ends in .txt")
    parser.add_argument("--phases", action="store_true", help="print each phase's CPU per job (bench/phases.py)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes draining side by side (their CPU "
                        "is summed; with --profile, each writes its own file, numbered)")
    parser.add_argument("--child", choices=("rq", "rebound"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.profile, args.phases)
        return
    print(f"{args.runs} no-op jobs drained by {args.workers} worker process(es) in burst mode, median of {args.rounds} "
          f"alternating rounds; load average {os.getloadavg()[0]:.1f}")
    print(f"{'database':<11} {'worker':<8} {'CPU ms/job':>10} {'jobs/s':>7} {'Redis ms/job':>12} "
          f"{'DB server ms/job':>16} {'WAL syncs/job':>13}")
    cluster = None
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.databases.split(","):
            url, postmaster = None, None
            if name == "postgresql":
                from bench.databases import DURABLE
                from tests.pg_cluster import Cluster

                cluster = Cluster(settings=DURABLE)
                url = cluster.url(cluster.create())
                postmaster = int((cluster.directory / "data" / "postmaster.pid").read_text().split()[0])
            workdir = Path(tmp) / name
            workdir.mkdir()
            bench = Bench(workdir, url)
            try:
                measure = Measure(bench, Servers(bench, postmaster), args.runs, args.phases, args.workers)
                rq_rounds, ours = [], []
                for number in range(args.rounds):
                    rq_rounds.append(measure.bare_rq(args.runs))
                    last = number == args.rounds - 1
                    ours.append(measure.rebound(args.runs, args.profile if last else None))
                for label, rounds in (("bare RQ", rq_rounds), ("Rebound", ours)):
                    wall = statistics.median(figures["wall"] for figures in rounds)
                    print(f"{name:<11} {label:<8} {_per_job_ms(rounds, 'cpu', args.runs):>10.3f} "
                          f"{args.runs / wall:>7.0f} {_per_job_ms(rounds, 'redis', args.runs):>12.3f} "
                          f"{_per_job_ms(rounds, 'database', args.runs):>16.3f} "
                          f"{_per_job_ms(rounds, 'wal syncs', args.runs) / 1000:>13.2f}", flush=True)
            finally:
                bench.close()
                if cluster is not None:
                    cluster.stop()
                    cluster = None


if __name__ == "__main__":
    main()
