"""Bulk replay of every open dead letter matching a filter, run by a real RQ worker on the maintenance queue.

    .venv/bin/rebound db upgrade && .venv/bin/rebound seed-demo --runs 1000000 --dead-letters 100000
                                                                 (both with REBOUND_DATA_DIR=/tmp/scale)
    REBOUND_DATA_DIR=/tmp/scale .venv/bin/python -m bench.bulk_replay --rate 500 [--code http_502]
    REBOUND_DATA_DIR=/tmp/scale .venv/bin/python -m bench.bulk_replay --rate max     # as fast as it safely can

The operation is started as the console starts it (audit row, progress hash, first slice on RQ); a
SimpleWorker in burst mode then runs the slices and their continuations. Only the maintenance queue is
worked, so the replayed runs wait on the default queue instead of competing for the database. Prints the
achieved rate against the configured one, and the CPU time the replaying process spent per 1,000 letters (on a
shared machine the wall clock says how loaded it was as much as how fast the code is; the CPU time does not).
With SQLite the database's work is in that process; with PostgreSQL the server's share is not counted.
It consumes the database's open dead letters: reseed (or restore a copy of the database file) to repeat.
"""

import argparse
import cProfile
import gc
import os
import time
from pathlib import Path

from rq import Queue
from sqlalchemy import func, select

from console import create_app
from console.extensions import db
from console.models import AuditEntry, DeadLetter, RunEvent
from console.processes.embedded_redis import start as start_redis
from console.processes.worker import build_worker
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.dlq import bulk as dlq_bulk
from console.services.dlq.filters import Filters
from console.services.engine import queueing


def check(op_id: str, started_at) -> None:
    """Print whether each replayed letter was replayed and queued once with one audit row, and the chain holds."""
    letters = db.session.execute(select(func.count()).select_from(DeadLetter).where(
        DeadLetter.status == "replayed", DeadLetter.resolved_at >= started_at)).scalar_one()
    rows, distinct = db.session.execute(select(func.count(), func.count(func.distinct(AuditEntry.target_id))).where(
        AuditEntry.action == "dead_letter.replay", AuditEntry.at >= started_at)).one()
    twice = db.session.execute(select(func.count()).select_from(
        select(RunEvent.run_id).where(RunEvent.kind == "replay_of_dead_letter", RunEvent.at >= started_at)
        .group_by(RunEvent.run_id).having(func.count() > 1).subquery())).scalar_one()
    chain = audit.verify(db.session)
    # The bench's own Redis holds only what this operation queued: each replayed run's new series, once.
    queued = Queue(queueing.RUN_QUEUE, connection=get_redis()).count
    print(f"{letters:,} letters replayed, {rows:,} audit rows for {distinct:,} letters, {twice} runs replayed twice, "
          f"{queued:,} runs queued; audit chain {'intact' if chain.ok else 'BROKEN'} over {chain.checked:,} rows")


def _cpu_s(process) -> float:
    """Return the CPU seconds (user + system) a child process has used so far, from /proc; 0 if unknown."""
    try:
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (AttributeError, OSError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", default=str(dlq_bulk.MAX_RATE),
                        help=f"runs per second asked for, or {dlq_bulk.FASTEST!r}: as fast as it safely can")
    parser.add_argument("--code", help="replay only dead letters with this error code")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the replaying worker to FILE")
    args = parser.parse_args()
    data_dir = os.environ.get("REBOUND_DATA_DIR", "/tmp/scale")
    url, redis_process = start_redis(f"{data_dir}/bench-redis")
    app = create_app({"REDIS_URL": url})
    try:
        with app.app_context():
            filters = Filters.parse({"code": args.code} if args.code else {})
            load_before = os.getloadavg()[0]
            started, cpu_started = time.perf_counter(), time.process_time()
            rate = args.rate if args.rate == dlq_bulk.FASTEST else float(args.rate)
            op = dlq_bulk.start_replay(Actor("bench"), None, filters=filters, rate=rate)
            print(f"replaying {op.total:,} open dead letters ({op.filter}) at up to {args.rate}/s")
            worker = build_worker(app, get_redis(), "simple", ["maintenance"])
            gc.collect()
            gc.freeze()  # as `rebound worker` leaves its start-up heap out of later collections (commands/processes.py)
            redis_cpu = _cpu_s(redis_process)
            if args.profile:
                cProfile.runctx("worker.work(burst=True, logging_level='WARNING')", globals(), locals(), args.profile)
            else:
                worker.work(burst=True, logging_level="WARNING")
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            redis_cpu = _cpu_s(redis_process) - redis_cpu
            progress = dlq_bulk.get(op.op_id)
            check(op.op_id, started_at=op.started_at)
        achieved = progress.done / elapsed
        print(f"status {progress.status}: {progress.done:,} replayed, {progress.skipped:,} skipped, "
              f"{progress.failed:,} failed in {elapsed:.1f} s")
        asked = f"ratio {achieved / float(args.rate):.2f}" if args.rate != dlq_bulk.FASTEST else "no rate asked"
        print(f"achieved {achieved:.0f} replays/s against {args.rate}/s asked: {asked}")
        per_thousand = 1000 * cpu / max(progress.done, 1)
        ceiling = f"{1000 / per_thousand:,.0f}" if per_thousand else "-"
        print(f"CPU of the replaying process: {cpu:.2f} s, {per_thousand:.3f} s per 1,000 letters (one free core: "
              f"{ceiling} letters/s); load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
        if redis_process is not None:
            per_thousand = 1000 * redis_cpu / max(progress.done, 1)
            print(f"CPU of Redis: {redis_cpu:.2f} s, {per_thousand:.3f} s per 1,000 letters")
    finally:
        if redis_process is not None:
            redis_process.terminate()


if __name__ == "__main__":
    main()
