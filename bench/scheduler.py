"""10,000 tasks due at the same instant: Rebound's scheduler against bare APScheduler, in one run.

    .venv/bin/python -m bench.scheduler [--tasks 10000]

Bare APScheduler fires 10,000 empty cron jobs; Rebound fires 10,000 registered `* * * * *` tasks, each
becoming a committed, queued run. Prints load/sync time, and p50/p99/max of the delay from the scheduled
instant to the job running (bare) or to the run's enqueued_at (Rebound), with missed and duplicates, and to the
`enqueued_at` RQ stored in the run's job (every run's job must be on the queue).
"""

import argparse
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import func, insert

from bench.engine import percentile
from console import create_app
from console.extensions import db
from console.models import Run, Task
from console.processes.embedded_redis import start as start_redis
from console.scheduler.process import build_scheduler
from console.services.engine import queueing
from console.services.people import tenants
from console.services.system import bootstrap

EXECUTORS = {"default": {"type": "threadpool", "max_workers": 20}}
DEFAULTS = {"coalesce": True, "max_instances": 1, "misfire_grace_time": 60}


def next_minute(margin_s: float = 15) -> datetime:
    """Return the next minute boundary at least margin_s away (time to load before it)."""
    now = datetime.now(UTC)
    boundary = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return boundary + timedelta(minutes=1) if (boundary - now).total_seconds() < margin_s else boundary


def bare(n: int) -> dict:
    delays, lock = [], threading.Lock()
    scheduler = BackgroundScheduler(timezone="UTC", executors=EXECUTORS, job_defaults=DEFAULTS)

    def job():
        fired = time.time()
        with lock:
            delays.append(fired % 60)  # seconds past the minute it was due at (delays stay well under 60 s)

    started = time.perf_counter()
    for i in range(n):
        scheduler.add_job(job, CronTrigger(minute="*", timezone="UTC"), id=f"j{i}")
    load_s = time.perf_counter() - started
    scheduler.start()
    deadline = time.monotonic() + 120
    while len(delays) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    scheduler.shutdown(wait=False)
    ms = [d * 1000 for d in delays]
    return {"load_s": load_s, "fired": len(ms), "p50": percentile(ms, 50), "p99": percentile(ms, 99),
            "max": max(ms)}


def rebound(n: int, workdir: Path) -> dict:
    url, redis_process = start_redis(str(workdir / "redis"))
    app = create_app({"DATA_DIR": str(workdir), "SQLALCHEMY_DATABASE_URI": f"sqlite:///{workdir}/s.db",
                      "REDIS_URL": url, "SECRET_KEY": "bench"})
    try:
        with app.app_context():
            db.create_all()
            bootstrap.ensure_ready()
            tenant = tenants.find("default")
            tenant.max_queued = tenant.max_running = 1_000_000
            now = datetime.now(UTC)
            db.session.execute(insert(Task), [
                {"tenant_id": tenant.id, "name": f"task-{i}", "handler": "python:demo.noop", "params": {},
                 "policy_overrides": {"queue_limit": 1_000_000}, "cron": "* * * * *", "timezone": "UTC",
                 "concurrency_policy": "allow", "jitter_s": 0, "debounce_s": 0, "paused": False,
                 "created_at": now, "updated_at": now, "misfire_grace_s": 300, "missed_total": 0}
                for i in range(n)])
            db.session.commit()
            scheduler, task_jobs, buffer = build_scheduler(app)
            started = time.perf_counter()
            task_jobs.sync(force=True)
            sync_s = time.perf_counter() - started
        buffer.start()
        scheduler.start()
        target = next_minute(margin_s=0)  # the first minute after start: every task is due then
        deadline = time.monotonic() + (target - datetime.now(UTC)).total_seconds() + 90
        with app.app_context():
            while time.monotonic() < deadline:
                count = db.session.query(func.count(Run.id)).filter(Run.scheduled_for == target).scalar()
                db.session.commit()
                if count >= n:
                    break
                time.sleep(0.5)
            rows = db.session.query(Run.enqueued_at, Run.scheduled_for, Run.task_id, Run.id).filter(
                Run.scheduled_for == target).all()
        scheduler.shutdown(wait=False)
        buffer.stop()
        pushed = pushed_at(url, [run_id for *_, run_id in rows])
    finally:
        redis_process.terminate()
    ms = [(e - s).total_seconds() * 1000 for e, s, *_ in rows]
    # The honest end point: when RQ's job hash says the job was queued (set just before it is pushed).
    pushed_ms = [(at - target).total_seconds() * 1000 for at in pushed if at is not None]
    tasks = {t for _, _, t, _ in rows}
    return {"sync_s": sync_s, "fired": len(rows), "missed": n - len(tasks), "duplicates": len(rows) - len(tasks),
            "p50": percentile(ms, 50), "p99": percentile(ms, 99), "max": max(ms),
            "not_queued": len(rows) - len(pushed_ms),
            "pushed_p50": percentile(pushed_ms, 50), "pushed_p99": percentile(pushed_ms, 99),
            "pushed_max": max(pushed_ms)}


def pushed_at(url: str, run_ids: list[int]) -> list[datetime | None]:
    """Return each run's RQ job `enqueued_at` (None if RQ has no job for it) and check the queue holds them all."""
    connection = redis.Redis.from_url(url)
    with connection.pipeline(transaction=False) as pipe:
        for run_id in run_ids:
            pipe.hget(f"rq:job:{queueing.job_id(run_id, 1, 0)}", "enqueued_at")
        stamps = pipe.execute()
    queued = set(connection.lrange(f"rq:queue:{queueing.RUN_QUEUE}", 0, -1))
    return [datetime.strptime(stamp.decode(), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
            if stamp and queueing.job_id(run_id, 1, 0).encode() in queued else None
            for run_id, stamp in zip(run_ids, stamps, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    args = parser.parse_args()
    print(f"{args.tasks} tasks due at the same minute; APScheduler thread pool of 20; 2 cores", flush=True)
    base = bare(args.tasks)
    print(f"bare APScheduler: add {base['load_s']:.1f} s; fired {base['fired']}; delay p50 {base['p50']:.0f} ms, "
          f"p99 {base['p99']:.0f} ms, max {base['max']:.0f} ms", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        ours = rebound(args.tasks, Path(tmp))
    print(f"Rebound: sync {ours['sync_s']:.1f} s; runs {ours['fired']}, missed {ours['missed']}, duplicates "
          f"{ours['duplicates']}; enqueued_at - scheduled_for p50 {ours['p50']:.0f} ms, p99 {ours['p99']:.0f} ms, "
          f"max {ours['max']:.0f} ms", flush=True)
    print(f"Rebound: RQ job enqueued_at - scheduled_for p50 {ours['pushed_p50']:.0f} ms, p99 {ours['pushed_p99']:.0f} "
          f"ms, max {ours['pushed_max']:.0f} ms; runs without a queued RQ job: {ours['not_queued']}", flush=True)
    print(f"p99 ratio Rebound / bare: {ours['p99'] / base['p99']:.2f} (enqueued_at), "
          f"{ours['pushed_p99'] / base['p99']:.2f} (RQ job queued)", flush=True)


if __name__ == "__main__":
    main()
