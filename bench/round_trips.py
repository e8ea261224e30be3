"""What one run costs the database: the statements a worker sends per attempt, as PostgreSQL logs them.

    .venv/bin/python -m bench.round_trips [--runs 200]

Submits no-op runs and executes them one after another in this process, as a worker would, on a private
PostgreSQL cluster with `log_statement = all`. Prints each statement one submit and one attempt sent (BEGIN and
COMMIT are round trips too), then the serial time per attempt on PostgreSQL and on SQLite, and on PostgreSQL the
CPU per attempt of this process and of the server's processes (from /proc; statements unlogged for that part).
The statement counts do not depend on the machine's load; the times do, and the CPU figures less so.
"""

import argparse
import os
import re
import tempfile
import time
from pathlib import Path

from bench.engine import UNLIMITED, Bench
from console.extensions import db
from console.models import Run
from console.services.actor import Actor
from console.services.engine import execute as engine
from console.services.engine.submit import submit
from console.services.people import tenants
from tests.pg_cluster import Cluster

LOGGED = {"log_statement": "all", "log_line_prefix": "'%p '", "log_min_duration_statement": "-1"}
STATEMENT = re.compile(r"^(\d+) LOG:  (?:statement|execute [^:]*): (.*)$")


def _submitted(bench: Bench, n: int, *, reset: bool = True) -> list[int]:
    if reset:
        bench.reset()
    with bench.app.app_context():
        tenant = tenants.find("default")
        return [submit(tenant, Actor("bench"), handler="demo.noop", policy=UNLIMITED)[0].id for _ in range(n)]


def _execute_all(bench: Bench, run_ids: list[int]) -> float:
    """Execute every run here, one after another; return seconds per attempt."""
    started = time.perf_counter()
    for run_id in run_ids:
        with bench.app.app_context():
            assert engine.execute(run_id, 0) == "succeeded"
    elapsed = time.perf_counter() - started
    with bench.app.app_context():
        done = db.session.query(db.func.count()).filter(Run.status == "succeeded").scalar()
    assert done == len(run_ids), f"only {done} of {len(run_ids)} runs succeeded"
    return elapsed / len(run_ids)


def _server_cpu(cluster: Cluster) -> float:
    """Return the seconds of CPU the cluster's postmaster and its children (the backends) have used so far."""
    master = int((cluster.directory / "data" / "postmaster.pid").read_text().split()[0])
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == master or int(fields[1]) == master:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def _statements(log: Path, offset: int) -> list[str]:
    lines = log.read_text(errors="replace")[offset:].splitlines()
    return [match.group(2) for line in lines if (match := STATEMENT.match(line))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    cluster = Cluster(settings=LOGGED)
    log = cluster.directory / "server.log"
    with (tempfile.TemporaryDirectory() as sqlite_dir, tempfile.TemporaryDirectory() as pg_dir,
          tempfile.TemporaryDirectory() as quiet_dir):
        pg = Bench(Path(pg_dir), cluster.url(cluster.create()))
        lite = Bench(Path(sqlite_dir))
        try:
            _submitted(pg, 1)
            offset = len(log.read_text(errors="replace"))
            one = _submitted(pg, 1, reset=False)
            sent = _statements(log, offset)
            print(f"PostgreSQL: {len(sent)} statements to submit a no-op run (the tenant read is the bench's):")
            for statement in sent:
                print("   ", statement[:150])
            offset = len(log.read_text(errors="replace"))
            _execute_all(pg, one)
            sent = _statements(log, offset)
            print(f"PostgreSQL: {len(sent)} statements for one attempt of a no-op run:")
            for statement in sent:
                print("   ", statement[:150])
            per_run = {}
            for name, bench in (("postgresql", pg), ("sqlite", lite)):
                per_run[name] = _execute_all(bench, _submitted(bench, args.runs))
            print(f"serial, in one process, {args.runs} runs: PostgreSQL {per_run['postgresql'] * 1000:.2f} ms per "
                  f"attempt, SQLite {per_run['sqlite'] * 1000:.2f} ms (ratio of rates "
                  f"{per_run['sqlite'] / per_run['postgresql']:.2f})")
            quiet = Bench(Path(quiet_dir), cluster.url(cluster.create()) + "?options=-c%20log_statement%3Dnone")
            try:
                ids = _submitted(quiet, args.runs)
                server, mine = _server_cpu(cluster), time.process_time()
                _execute_all(quiet, ids)
                server, mine = _server_cpu(cluster) - server, time.process_time() - mine
            finally:
                quiet.close()
            print(f"PostgreSQL, CPU per attempt over {args.runs} attempts: this process "
                  f"{mine / args.runs * 1e3:.3f} ms, the server's processes {server / args.runs * 1e3:.3f} ms")
        finally:
            pg.close()
            lite.close()
            cluster.stop()


if __name__ == "__main__":
    main()
