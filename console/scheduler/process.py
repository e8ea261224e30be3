"""The scheduler process: APScheduler in memory, firing only while it holds the leader lock."""

import importlib
import logging
import threading

from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.exc import InterfaceError, OperationalError

from console.redis_conn import get_redis
from console.scheduler.firing import FiringBuffer
from console.scheduler.task_jobs import TaskJobs
from console.services.system.leader import LeaderLock
from console.services.system.maintenance import MAINTENANCE

log = logging.getLogger("rebound.scheduler")
SYNC_S = 2  # task edits reach the schedule within this (plus one APScheduler tick)
CATCH_UP_S = 30
# Renew the leader lock every 0.3 of its TTL (3 s of 10): two renewals may fail and the third still keeps it.
RENEW_FRACTION = 0.3


def _in_app(app, func, name: str):
    def run():
        with app.app_context():
            try:
                func()
            except (OperationalError, InterfaceError) as unanswered:
                # A database restarting or out of disk: one line a job a tick says it, a traceback each said nothing.
                log.warning("scheduler job %s skipped: the database did not answer (%s)", name,
                            str(unanswered.orig or unanswered).splitlines()[0][:200])
            except Exception:
                log.exception("scheduler job %s failed", name)

    return run


def _dotted(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def build_scheduler(app) -> tuple[BackgroundScheduler, TaskJobs, FiringBuffer]:
    """Create an in-memory APScheduler with the maintenance schedule and the task jobs' upkeep."""
    # In memory, rebuilt from our tables at start: the database is the truth, not a job store. A large pool
    # and a generous default grace, so a burst of 10k simultaneous firings is delivered, not dropped.
    scheduler = BackgroundScheduler(
        timezone="UTC",
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60},
        executors={"default": {"type": "threadpool", "max_workers": 20}},
    )
    buffer = FiringBuffer(app)
    task_jobs = TaskJobs(app, scheduler, buffer)
    for job in MAINTENANCE:
        scheduler.add_job(_in_app(app, _dotted(job.func), job.id), "interval", seconds=job.seconds, id=job.id,
                          name=job.description, replace_existing=True)
    scheduler.add_job(_in_app(app, task_jobs.sync, "task-sync"), "interval", seconds=SYNC_S, id="task-sync",
                      name="Mirror the tasks table into cron jobs", replace_existing=True)
    scheduler.add_job(_in_app(app, task_jobs.catch_up, "task-catch-up"), "interval", seconds=CATCH_UP_S,
                      id="task-catch-up", name="Catch up firings missed while no scheduler led",
                      replace_existing=True)
    return scheduler, task_jobs, buffer


class Leadership:
    """Follow the leader lock: on winning it catch up, then fire; on losing it, stop firing."""

    def __init__(self, lock: LeaderLock, catch_up, scheduler):
        self.lock, self.catch_up, self.scheduler = lock, catch_up, scheduler
        self.leading = False

    def contend(self) -> bool:
        """Take or renew the lock once, start or stop firing if that changed, and tell whether we lead."""
        now_leading = self.lock.acquire_or_renew()
        if now_leading != self.leading:
            self.leading = now_leading
            if now_leading:
                # Firings missed while nobody led are caught up before live firing resumes.
                self.catch_up()
                self.scheduler.resume()
            else:
                self.scheduler.pause()
            # Leading is the normal state of a console's one scheduler (every start said it as a warning); losing
            # the lead is the news (helper 126).
            log.log(logging.INFO if now_leading else logging.WARNING, "scheduler %s %s", self.lock.identity,
                    "is now the leader" if now_leading else "lost leadership")
        return self.leading


def run(app, stop: threading.Event) -> None:
    """Contend for leadership; while leading, run the schedule; until `stop` is set."""
    ttl_s = app.config["LEADER_TTL_S"]
    with app.app_context():
        lock = LeaderLock(get_redis(), ttl_s=ttl_s)
        scheduler, task_jobs, buffer = build_scheduler(app)
        task_jobs.sync(force=True)
    buffer.start()
    scheduler.start(paused=True)
    leadership = Leadership(lock, _in_app(app, task_jobs.catch_up, "catch-up on leadership"), scheduler)
    log.info("scheduler %s started; contending for leadership", lock.identity)
    try:
        while not stop.is_set():
            with app.app_context():  # the lock counts its renewals in the metrics, which live in the app's Redis
                leadership.contend()
            stop.wait(ttl_s * RENEW_FRACTION)
    finally:
        scheduler.shutdown(wait=False)
        buffer.stop()
        if leadership.leading:
            lock.release()
        log.info("scheduler %s stopped", lock.identity)
