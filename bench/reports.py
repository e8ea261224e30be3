"""The Reports page over a big history: server time per request, in one process.

    REBOUND_DATA_DIR=/tmp/scale-reports .venv/bin/rebound db upgrade
    REBOUND_DATA_DIR=/tmp/scale-reports .venv/bin/rebound seed-demo --runs 1000000 --days 90 --tasks 200
    REBOUND_DATA_DIR=/tmp/scale-reports .venv/bin/python -m bench.reports [--requests 20]

seed-demo writes the history and rebuilds the rollups. Each request goes through the app in-process (no
network) as a logged-in manager, after one warm-up; p50/p95 are printed against the 150 ms target, with the
rollup job's pass (the current hour) and a full rebuild timed once at the end.
"""

import argparse
import os
import statistics
import time

from bench.engine import percentile
from console import create_app
from console.extensions import db
from console.models import Run
from console.models.reports import report_days, report_hours
from console.processes.embedded_redis import start as start_redis
from console.services.actor import Actor
from console.services.people import users
from console.services.reports import rollup

PAGES = [
    ("healthz (baseline)", "/healthz"),
    ("reports, 24 h", "/reports?period=24h"),
    ("reports, 7 d", "/reports?period=7d"),
    ("reports, 30 d", "/reports?period=30d"),
    ("reports, 90 d", "/reports?period=90d"),
    ("reports, 90 d, one task", "/reports?period=90d&task={task}"),
    ("API summary, 90 d", "/api/reports/summary?period=90d"),
    ("breaches, 90 d", "/reports/breaches?period=90d"),
    ("tasks CSV, 90 d", "/reports/tasks.csv?period=90d"),
    ("overview (history 7 d)", "/overview?history=7d"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--no-rebuild", action="store_true", help="Skip timing a full rebuild at the end.")
    args = parser.parse_args()
    data_dir = os.environ.get("REBOUND_DATA_DIR", "/tmp/scale-reports")
    url, redis_process = start_redis(f"{data_dir}/bench-redis")
    app = create_app({"REDIS_URL": url, "WTF_CSRF_ENABLED": False, "LOGIN_RATE_LIMIT": "1000 per minute"})
    try:
        with app.app_context():
            runs = db.session.query(db.func.count(Run.id)).scalar()
            hours = db.session.query(db.func.count()).select_from(report_hours).scalar()
            days = db.session.query(db.func.count()).select_from(report_days).scalar()
            task = db.session.query(db.func.max(Run.task_id)).scalar()
            if users.find("bench-manager") is None:
                users.create("bench-manager", "manager", "bench-password-1", Actor("bench"))
            _, token = _token()
        client, api = app.test_client(), app.test_client()  # the API takes tokens, never the session cookie
        client.post("/login", data={"username": "bench-manager", "password": "bench-password-1"})
        print(f"{runs:,} runs; rollups: {hours:,} hour rows, {days:,} day rows; SQLite WAL; "
              f"{args.requests} requests per page after a warm-up")
        print(f"{'page':<28} {'status':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        for name, path in PAGES:
            path = path.format(task=task)
            via = api if path.startswith("/api/") else client
            headers = {"Authorization": f"Bearer {token}"} if path.startswith("/api/") else {}
            status = via.get(path, headers=headers).status_code
            times = []
            for _ in range(args.requests):
                started = time.perf_counter()
                via.get(path, headers=headers)
                times.append((time.perf_counter() - started) * 1000)
            print(f"{name:<28} {status:>6} {statistics.median(times):>8.1f} {percentile(times, 95):>8.1f} "
                  f"{max(times):>8.1f}", flush=True)
        with app.app_context():
            started = time.perf_counter()
            span = rollup.tick()
            print(f"rollups job, one pass ({span[0]:%H:%M}–{span[1]:%H:%M}): "
                  f"{(time.perf_counter() - started) * 1000:.0f} ms")
            if not args.no_rebuild:
                started = time.perf_counter()
                rebuilt = rollup.rebuild()
                print(f"rebound sla-report --rebuild ({rebuilt} days): {time.perf_counter() - started:.1f} s")
    finally:
        redis_process.terminate()


def _token():
    from console.services.people import tokens

    return tokens.issue(users.find("bench-manager"), Actor("bench"))


if __name__ == "__main__":
    main()
