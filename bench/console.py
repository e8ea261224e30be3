"""Console pages over a big database: server time per request, in one process.

    .venv/bin/rebound seed-demo --runs 1000000 --dead-letters 100000   (with REBOUND_DATA_DIR=/tmp/scale)
    REBOUND_DATA_DIR=/tmp/scale .venv/bin/python -m bench.console [--requests 20]

Each page is requested through the app in-process (no network), after one warm-up request; p50/p95
are printed next to /healthz measured the same way, and against the 150 ms target. The CPU time of a request
(the thread's, SQLite's work included) is printed too: on a shared machine it moves less than the wall clock.
"""

import argparse
import os
import statistics
import time

from bench.engine import percentile
from console import create_app
from console.extensions import db
from console.models import DeadLetter, Run
from console.processes.embedded_redis import start as start_redis
from console.services.actor import Actor
from console.services.people import users

PAGES = [
    ("healthz (baseline)", "/healthz"),
    ("overview", "/overview"),
    ("DLQ grouped", "/dlq/"),
    ("DLQ entries", "/dlq/?view=list"),
    ("DLQ entries, page 2", "/dlq/?view=list&before={dl_mid}"),
    ("DLQ search", "/dlq/?view=list&q=timed+out"),
    ("DLQ filter by code", "/dlq/?code=http_502"),
    ("runs", "/runs"),
    ("runs, status dead", "/runs?status=dead"),
    ("runs, page 2", "/runs?before={run_mid}"),
    ("runs, error code", "/runs?error_code=db_timeout"),
    ("run page", "/runs/{run_mid}"),
    ("runs timeline", "/runs/timeline"),
    ("work orders", "/workorders"),
    ("tasks", "/tasks"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    data_dir = os.environ.get("REBOUND_DATA_DIR", "/tmp/scale")
    url, redis_process = start_redis(f"{data_dir}/bench-redis")
    app = create_app({"REDIS_URL": url, "WTF_CSRF_ENABLED": False, "LOGIN_RATE_LIMIT": "1000 per minute"})
    try:
        with app.app_context():
            runs = db.session.query(db.func.count(Run.id)).scalar()
            letters = db.session.query(db.func.count(DeadLetter.id)).scalar()
            run_mid = db.session.query(db.func.max(Run.id)).scalar() // 2
            dl_mid = db.session.query(db.func.max(DeadLetter.id)).scalar() // 2
            if users.find("bench") is None:
                users.create("bench", "admin", "bench-password-1", Actor("bench"))
        client = app.test_client()
        client.post("/login", data={"username": "bench", "password": "bench-password-1"})
        print(f"{runs:,} runs, {letters:,} dead letters; SQLite WAL; {args.requests} requests per page after a warm-up")
        print(f"{'page':<24} {'status':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'CPU p50 ms':>10}")
        for name, path in PAGES:
            path = path.format(run_mid=run_mid, dl_mid=dl_mid)
            status = client.get(path).status_code
            times, cpu = [], []
            for _ in range(args.requests):
                started, used = time.perf_counter(), time.thread_time()
                client.get(path)
                times.append((time.perf_counter() - started) * 1000)
                cpu.append((time.thread_time() - used) * 1000)
            print(f"{name:<24} {status:>6} {statistics.median(times):>8.1f} {percentile(times, 95):>8.1f} "
                  f"{max(times):>8.1f} {statistics.median(cpu):>10.1f}", flush=True)
    finally:
        redis_process.terminate()


if __name__ == "__main__":
    main()
