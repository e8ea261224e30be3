"""Which statements PostgreSQL's server time goes to in the engine's end to end (pg_stat_statements).

    .venv/bin/python -m bench.pg_statements [--runs 2000] [--top 8]

A private cluster as `bench.databases` starts it (durable), with `pg_stat_statements` preloaded and planning tracked.
One end-to-end round (a client submitting one by one while two warm workers drain) warms the connections and
psycopg's prepared statements, the statistics are reset, and a second round is measured. Printed for each statement
sent at least once every two runs (the round's own set-up, emptying the tables, is left out): calls, executor and
planner ms per run, buffers touched and WAL records written per call, and the statement's start.
"""

import argparse
import tempfile
from pathlib import Path

import psycopg

from bench.databases import DURABLE
from bench.engine import Bench
from tests.pg_cluster import Cluster

TOP = """SELECT calls, total_exec_time, total_plan_time, shared_blks_hit + shared_blks_read, wal_records,
                left(regexp_replace(query, '\\s+', ' ', 'g'), %(width)s)
         FROM pg_stat_statements WHERE calls >= %(runs)s / 2
         ORDER BY total_exec_time + total_plan_time DESC LIMIT %(top)s"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--top", type=int, default=8, help="statements shown, the dearest first")
    parser.add_argument("--width", type=int, default=110, help="characters of each statement shown")
    args = parser.parse_args()
    cluster = Cluster(settings={**DURABLE, "shared_preload_libraries": "pg_stat_statements",
                                "pg_stat_statements.track_planning": "on"})
    url = cluster.url(cluster.create())
    direct = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(direct, autocommit=True) as connection:
        connection.execute("CREATE EXTENSION pg_stat_statements")
    with tempfile.TemporaryDirectory() as workdir:
        bench = Bench(Path(workdir), url)
        try:
            bench.rebound_end_to_end(args.runs, 2)
            with psycopg.connect(direct, autocommit=True) as connection:
                connection.execute("SELECT pg_stat_statements_reset()")
            rate = bench.rebound_end_to_end(args.runs, 2)
            with psycopg.connect(direct, autocommit=True) as connection:
                rows = connection.execute(TOP, {"top": args.top, "width": args.width, "runs": args.runs}).fetchall()
        finally:
            bench.close()
            cluster.stop()
    print(f"{args.runs} no-op runs end to end, 2 simple workers, durable cluster: {rate:.0f} runs/s, the machine's CPU "
          f"{bench.end_to_end_cpu_ms:.2f} ms a run; the server's statements, dearest first (ms per run):")
    print(f"{'calls':>7} {'exec':>7} {'plan':>6} {'buffers':>8} {'WAL':>5}  statement (buffers and WAL records a call)")
    for calls, executing, planning, buffers, wal, query in rows:
        print(f"{calls:>7} {executing / args.runs:>7.3f} {planning / args.runs:>6.3f} {buffers / max(calls, 1):>8.1f} "
              f"{wal / max(calls, 1):>5.1f}  {query}")


if __name__ == "__main__":
    main()
