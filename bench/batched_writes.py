"""What batching would buy PostgreSQL: an attempt's two writes (the claim, the success) for N runs per statement.

    .venv/bin/python -m bench.batched_writes [--runs 4000] [--batches 1,10,50,200]

Issue 20 asks PostgreSQL for 0.8x SQLite's rate on one 2-core box, where PostgreSQL's server spends ~2 ms of CPU a
run on the workers' cores (docs/benchmarks.md, "Session 21: what 0.8x would cost"). The engine writes one run per
statement: a claim durable before its handler runs, an outcome recorded as soon as it is known. A worker that
claimed and recorded many runs per statement would change those invariants; this measures what it would buy before
anyone builds it. On a private PostgreSQL cluster (durable: fsync, synchronous_commit on) with the console's schema
and indexes, it submits no-op runs through the engine, then moves them pending -> running -> succeeded with the
engine's two writes (the run's UPDATE and its timeline row's INSERT, one statement each, as the engine sends them)
for N runs per statement, each statement its own transaction. It prints, per run, the CPU of this process (the
client's side: psycopg and SQLAlchemy) and of the server's processes, and the wall time. The attempt's admission
read, which batching would also have to fold, is not part of it (session 17 measured it at 0.29 ms of the server's
executor time a run).
"""

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import bindparam, text

from bench.engine import Bench
from bench.round_trips import _server_cpu, _submitted
from console.domain.clock import utcnow
from console.extensions import db
from tests.pg_cluster import Cluster

# The engine's claim and success (console/services/engine/transitions.py writes each as one statement): the run's
# UPDATE, guarded by its status, and its timeline row from what the UPDATE returned.
CLAIM = text("""
WITH moved AS (
  UPDATE runs SET status = 'running', attempt = attempt + 1, executions = executions + 1,
         retry_token = md5(id::text || :salt), worker_id = :worker, started_at = COALESCE(started_at, :now),
         heartbeat_at = :now, policy_version = 1, progress = 0, progress_message = NULL, next_retry_at = NULL,
         wait_reason = NULL, updated_at = :now
  WHERE id = ANY(:ids) AND status = 'pending'
  RETURNING id, attempt, series, executions, retry_token)
INSERT INTO run_events (run_id, at, kind, from_status, to_status, attempt, series, executions, retry_token, worker_id)
SELECT id, :now, 'running', 'pending', 'running', attempt, series, executions, retry_token, :worker FROM moved
""").bindparams(bindparam("ids", expanding=False))
SUCCESS = text("""
WITH moved AS (
  UPDATE runs SET status = 'succeeded', status_reason = NULL, finished_at = :now, progress = 100, updated_at = :now
  WHERE id = ANY(:ids) AND status = 'running'
  RETURNING id, attempt, series, executions, retry_token)
INSERT INTO run_events (run_id, at, kind, from_status, to_status, attempt, series, executions, retry_token, worker_id,
                        duration_ms)
SELECT id, :now, 'succeeded', 'running', 'succeeded', attempt, series, executions, retry_token, :worker, 0 FROM moved
""").bindparams(bindparam("ids", expanding=False))


def _move(bench: Bench, cluster: Cluster, run_ids: list[int], size: int) -> tuple[float, float, float]:
    """Claim then succeed every run, `size` runs per statement; return (client CPU, server CPU, wall) seconds."""
    chunks = [run_ids[i:i + size] for i in range(0, len(run_ids), size)]
    with bench.app.app_context():
        connection = db.session.connection()
        connection.commit()
        server, client, wall = _server_cpu(cluster), time.process_time(), time.perf_counter()
        for statement in (CLAIM, SUCCESS):
            for chunk in chunks:
                connection.execute(statement, {"ids": chunk, "now": utcnow(), "worker": "bench.1",
                                               "salt": uuid.uuid4().hex})
                connection.commit()
        spent = (time.process_time() - client, _server_cpu(cluster) - server, time.perf_counter() - wall)
        moved = connection.execute(text("SELECT count(*) FROM runs WHERE status = 'succeeded'")).scalar_one()
    assert moved == len(run_ids), f"only {moved} of {len(run_ids)} runs succeeded"
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--batches", default="1,10,50,200", help="runs per statement, comma-separated")
    args = parser.parse_args()
    sizes = [int(size) for size in args.batches.split(",")]
    cluster = Cluster()
    with tempfile.TemporaryDirectory() as workdir:
        bench = Bench(Path(workdir), cluster.url(cluster.create()))
        try:
            print(f"{args.runs} no-op runs, claimed then succeeded; ms per run (two writes, two commits at N = 1)")
            print(f"{'runs per statement':>18} {'this process':>13} {'server':>8} {'wall':>8}")
            for size in sizes:
                client, server, wall = _move(bench, cluster, _submitted(bench, args.runs), size)
                print(f"{size:>18} {client / args.runs * 1e3:>13.3f} {server / args.runs * 1e3:>8.3f} "
                      f"{wall / args.runs * 1e3:>8.3f}")
        finally:
            bench.close()
            cluster.stop()


if __name__ == "__main__":
    main()
