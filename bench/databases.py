"""Rebound's engine on PostgreSQL against SQLite, on one machine: drain and end to end, same workers and Redis.

    .venv/bin/python -m bench.databases [--runs 2000] [--rounds 3] [--synchronous-commit off]

PostgreSQL is a private cluster started here (Debian's server programs, tests/pg_cluster.py: fsync on, as a
real server runs), SQLite the WAL file `rebound up` uses. Rounds alternate the two; medians are printed with
the ratio PostgreSQL / SQLite (target ≥ 0.8 on one box; on several hosts PostgreSQL scales with workers, SQLite
cannot). End to end also prints the machine's CPU per run (client, workers, Redis and PostgreSQL's processes
together, from /proc/stat), which moves much less with the VM's load than the rates, and that CPU split by
process. `--synchronous-commit off` gives the workers' connections PostgreSQL's `synchronous_commit=off` through the
URL, as the README's "Scale out" shows: the durability SQLite's `synchronous=NORMAL` already has.
`--database-core` gives PostgreSQL's server the machine's last core and everything else (this process, the workers,
Redis) the others, for both databases: one application box against the same box with a database host of its own.
`--unix-socket` connects Rebound to PostgreSQL through the cluster's Unix-domain socket instead of TCP on loopback,
as a server on the application's own box is usually reached (Debian's default, `host=/var/run/postgresql`).
"""

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from bench import machine
from bench.engine import Bench
from tests.pg_cluster import Cluster

# A real server keeps its durability settings; the tests' cluster turns them off for speed.
DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
OPTIONS = {"on": "", "off": "options=-c%20synchronous_commit%3Doff"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument("--synchronous-commit", choices=("on", "off"), default="on",
                        help="PostgreSQL's synchronous_commit for Rebound's connections (set in the URL)")
    parser.add_argument("--database-core", action="store_true",
                        help="PostgreSQL's server on the last core, everything else on the others")
    parser.add_argument("--unix-socket", action="store_true",
                        help="reach PostgreSQL through its Unix-domain socket, not TCP on 127.0.0.1")
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    if args.database_core:
        # The cluster's processes inherit the affinity they are started with; the workers and Redis inherit the rest.
        os.sched_setaffinity(0, cores[-1:])
    cluster = Cluster(settings=DURABLE)
    if args.database_core:
        os.sched_setaffinity(0, cores[:-1])
    with tempfile.TemporaryDirectory() as sqlite_dir, tempfile.TemporaryDirectory() as pg_dir:
        database = cluster.create()
        url = cluster.socket_url(database) if args.unix_socket else cluster.url(database)
        query = "&".join(part for part in (url.partition("?")[2], OPTIONS[args.synchronous_commit]) if part)
        url = url.partition("?")[0] + (f"?{query}" if query else "")
        benches = {"sqlite": Bench(Path(sqlite_dir)), "postgresql": Bench(Path(pg_dir), url)}
        try:
            figures = {name: {"drain": [], "end to end": [], "cpu": [], "roles": []} for name in benches}
            for _ in range(args.rounds):
                for name, bench in benches.items():
                    figures[name]["drain"].append(bench.rebound(args.runs, args.processes, "simple"))
                    figures[name]["end to end"].append(bench.rebound_end_to_end(args.runs, args.processes))
                    figures[name]["cpu"].append(bench.end_to_end_cpu_ms)
                    figures[name]["roles"].append(bench.end_to_end_by_role)
            print(f"{args.runs} no-op runs, {args.processes} simple workers, median of {args.rounds} alternating "
                  f"rounds; embedded Redis per database; PostgreSQL synchronous_commit={args.synchronous_commit}")
            print(f"PostgreSQL reached through {'its Unix-domain socket' if args.unix_socket else 'TCP on 127.0.0.1'}")
            if args.database_core:
                print(f"PostgreSQL's server on core {cores[-1]}; this process, the workers and Redis on {cores[:-1]}")
            print(f"{'':<11} {'SQLite/s':>9} {'PostgreSQL/s':>13} {'ratio':>6}")
            for measure in ("drain", "end to end"):
                lite = statistics.median(figures["sqlite"][measure])
                pg = statistics.median(figures["postgresql"][measure])
                print(f"{measure:<11} {lite:>9.0f} {pg:>13.0f} {pg / lite:>6.2f}")
            lite, pg = (statistics.median(figures[name]["cpu"]) for name in ("sqlite", "postgresql"))
            print(f"end to end, the machine's CPU per run (every process, /proc/stat): SQLite {lite:.2f} ms, "
                  f"PostgreSQL {pg:.2f} ms; ratio of the rates it allows on the same cores {lite / pg:.2f}")
            for name, label in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL")):
                print(f"  {label}, by process (ms per run; 'this process' submits): "
                      f"{machine.describe_roles(figures[name]['roles'])}")
        finally:
            for bench in benches.values():
                bench.close()
            cluster.stop()


if __name__ == "__main__":
    main()
