"""Bulk replay of every open dead letter matching a filter, run by a real RQ worker on the maintenance queue.

    .venv/bin/rebound seed-demo --runs 1000000 --dead-letters 100000   (with REBOUND_DATA_DIR=/tmp/scale)
    REBOUND_DATA_DIR=/tmp/scale .venv/bin/python -m bench.bulk_replay --rate 500 [--code http_502]
    REBOUND_DATA_DIR=/tmp/scale .venv/bin/python -m bench.bulk_replay --rate max     # as fast as it safely can

The operation is started as the console starts it (audit row, progress hash, first slice on RQ); a
SimpleWorker in burst mode then runs the slices and their continuations. Only the maintenance queue is
worked, so the replayed runs wait on the default queue instead of competing for the database. Prints the
achieved rate against the configured one. It consumes the database's open dead letters: reseed to repeat.
"""

import argparse
import os
import time

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


def check(op_id: str, started_at) -> None:
    """Print whether each letter this operation replayed was replayed once, with one audit row, and the chain holds."""
    letters = db.session.execute(select(func.count()).select_from(DeadLetter).where(
        DeadLetter.status == "replayed", DeadLetter.resolved_at >= started_at)).scalar_one()
    rows, distinct = db.session.execute(select(func.count(), func.count(func.distinct(AuditEntry.target_id))).where(
        AuditEntry.action == "dead_letter.replay", AuditEntry.at >= started_at)).one()
    twice = db.session.execute(select(func.count()).select_from(
        select(RunEvent.run_id).where(RunEvent.kind == "replay_of_dead_letter", RunEvent.at >= started_at)
        .group_by(RunEvent.run_id).having(func.count() > 1).subquery())).scalar_one()
    chain = audit.verify(db.session)
    print(f"{letters:,} letters replayed, {rows:,} audit rows for {distinct:,} letters, {twice} runs replayed twice; "
          f"audit chain {'intact' if chain.ok else 'BROKEN'} over {chain.checked:,} rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", default=str(dlq_bulk.MAX_RATE),
                        help=f"runs per second asked for, or {dlq_bulk.FASTEST!r}: as fast as it safely can")
    parser.add_argument("--code", help="replay only dead letters with this error code")
    args = parser.parse_args()
    data_dir = os.environ.get("REBOUND_DATA_DIR", "/tmp/scale")
    url, redis_process = start_redis(f"{data_dir}/bench-redis")
    app = create_app({"REDIS_URL": url})
    try:
        with app.app_context():
            filters = Filters.parse({"code": args.code} if args.code else {})
            started = time.perf_counter()
            rate = args.rate if args.rate == dlq_bulk.FASTEST else float(args.rate)
            op = dlq_bulk.start_replay(Actor("bench"), None, filters=filters, rate=rate)
            print(f"replaying {op.total:,} open dead letters ({op.filter}) at up to {args.rate}/s")
            build_worker(app, get_redis(), "simple", ["maintenance"]).work(burst=True, logging_level="WARNING")
            elapsed = time.perf_counter() - started
            progress = dlq_bulk.get(op.op_id)
            check(op.op_id, started_at=op.started_at)
        achieved = progress.done / elapsed
        print(f"status {progress.status}: {progress.done:,} replayed, {progress.skipped:,} skipped, "
              f"{progress.failed:,} failed in {elapsed:.1f} s")
        asked = f"ratio {achieved / float(args.rate):.2f}" if args.rate != dlq_bulk.FASTEST else "no rate asked"
        print(f"achieved {achieved:.0f} replays/s against {args.rate}/s asked: {asked}")
    finally:
        if redis_process is not None:
            redis_process.terminate()


if __name__ == "__main__":
    main()
