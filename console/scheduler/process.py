"""The scheduler process: APScheduler in memory, firing only while it holds the leader lock."""

import importlib
import logging
import threading

from apscheduler.schedulers.background import BackgroundScheduler

from console.redis_conn import get_redis
from console.scheduler.leader import LeaderLock
from console.scheduler.maintenance import MAINTENANCE

log = logging.getLogger("rebound.scheduler")


def _call_in_app(app, dotted: str):
    module, _, name = dotted.partition(":")
    func = getattr(importlib.import_module(module), name)

    def run():
        with app.app_context():
            try:
                func()
            except Exception:
                log.exception("maintenance job %s failed", dotted)

    return run


def build_scheduler(app) -> BackgroundScheduler:
    """Create an in-memory APScheduler with the maintenance schedule applied."""
    # In memory, rebuilt from our tables at start: the database is the truth, not a job store.
    scheduler = BackgroundScheduler(
        timezone="UTC",
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
        executors={"default": {"type": "threadpool", "max_workers": 10}},
    )
    for job in MAINTENANCE:
        scheduler.add_job(_call_in_app(app, job.func), "interval", seconds=job.seconds, id=job.id,
                          name=job.description, replace_existing=True)
    return scheduler


def run(app, stop: threading.Event, renew_every_s: float = 3.0, ttl_s: float = 10.0) -> None:
    """Contend for leadership; while leading, run the schedule; until `stop` is set."""
    with app.app_context():
        lock = LeaderLock(get_redis(), ttl_s=ttl_s)
    scheduler = build_scheduler(app)
    scheduler.start(paused=True)
    leading = False
    log.info("scheduler %s started; contending for leadership", lock.identity)
    try:
        while not stop.is_set():
            now_leading = lock.acquire_or_renew()
            if now_leading != leading:
                leading = now_leading
                (scheduler.resume if leading else scheduler.pause)()
                log.warning("scheduler %s %s", lock.identity, "is now the leader" if leading else "lost leadership")
            stop.wait(renew_every_s)
    finally:
        scheduler.shutdown(wait=False)
        if leading:
            lock.release()
        log.info("scheduler %s stopped", lock.identity)
