"""What one submit costs each database as the backlog of waiting runs grows: serial, in-process, no workers.

    .venv/bin/python -m bench.submit_backlog [--runs 2000] [--blocks 6] [--databases sqlite,postgresql]
    PYTHONPATH=../before .venv/bin/python -m bench.submit_backlog ...     # the same on another checkout's code

Submits `demo.noop` runs one after another (the engine's `submit`, as a Python caller or `rebound web` calls it)
with a policy whose queue limit is out of reach, and prints per block of --runs submits the CPU per submit of this
process (Redis's enqueue included, Redis's own CPU not) and of PostgreSQL's server processes (/proc), and the wall
time per submit. The backlog is every run submitted before the block: nothing drains them. PostgreSQL is a private
cluster with its durability on (bench.databases' settings), SQLite the WAL file `rebound up` uses.

A submit counts the runs already waiting for its task (or handler) and its tenant, to refuse one past the policy's
`queue_limit` or the tenant's `max_queued`: those counts read the live runs' index entries, so what a submit costs
grows with the backlog up to those limits (1,000 and 10,000 by default). Compare within one run.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.databases import DURABLE
from bench.engine import UNLIMITED, Bench
from bench.worker_cpu import tree_cpu
from console.services.actor import Actor
from console.services.engine.submit import submit
from console.services.people import tenants
from tests.pg_cluster import Cluster


def measure(name: str, runs: int, blocks: int) -> None:
    """Submit blocks of runs on one database and print each block's cost per submit."""
    cluster = Cluster(settings=DURABLE) if name == "postgresql" else None
    url = cluster.url(cluster.create()) if cluster else None
    postmaster = int((cluster.directory / "data" / "postmaster.pid").read_text().split()[0]) if cluster else None
    server = (lambda: tree_cpu(postmaster)) if postmaster else (lambda: 0.0)
    with tempfile.TemporaryDirectory() as workdir:
        bench = Bench(Path(workdir), url)
        try:
            bench.reset()
            with bench.app.app_context():
                tenant = tenants.find("default")
                submit(tenant, Actor("bench"), handler="demo.noop", policy=UNLIMITED)  # what a process reads once
                for block in range(blocks):
                    cpu, server_cpu, wall = time.process_time(), server(), time.perf_counter()
                    for _ in range(runs):
                        submit(tenant, Actor("bench"), handler="demo.noop", policy=UNLIMITED)
                    cpu, server_cpu = time.process_time() - cpu, server() - server_cpu
                    wall = time.perf_counter() - wall
                    print(f"{name:<11} {block * runs + 1:>7}-{(block + 1) * runs:<7} {cpu / runs * 1000:>13.3f} "
                          f"{server_cpu / runs * 1000:>16.3f} {wall / runs * 1000:>13.3f}", flush=True)
        finally:
            bench.close()
            if cluster:
                cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000, help="submits per block")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--databases", default="sqlite,postgresql", help="sqlite, postgresql or both")
    args = parser.parse_args()
    print(f"serial submits, no workers; load average {os.getloadavg()[0]:.1f}")
    print(f"{'database':<11} {'runs':<15} {'CPU ms/submit':>13} {'DB server ms/sub':>16} {'wall ms/sub':>13}")
    for name in args.databases.split(","):
        measure(name, args.runs, args.blocks)


if __name__ == "__main__":
    main()
