"""RQ's per-job housekeeping, once a second: the worker key (never let lapse) and the suspension check."""

import redis
from rq import Queue, Worker
from rq.scheduler import RQScheduler
from rq.suspension import suspend
from rq.worker import BaseWorker
from sqlalchemy import func, select

from console.extensions import db
from console.models import Run
from console.processes.worker import build_worker
from console.redis_conn import get_redis
from console.services.engine import queueing


def test_a_busy_worker_beats_once_per_second_not_per_job(app, runs, monkeypatch):
    beats = []
    real = BaseWorker.heartbeat

    def counted(self, timeout=None, pipeline=None):
        # The worker's own beat: bare, or the one pipeline that also says the worker exists (it starts with EXISTS).
        stack = getattr(pipeline, "command_stack", [])
        own = timeout is None and (pipeline is None or bool(stack) and stack[0][0][:2] == ("EXISTS", self.key))
        beats.append("worker" if own else "job")
        return real(self, timeout, pipeline)

    monkeypatch.setattr(BaseWorker, "heartbeat", counted)
    ids = [runs.submit() for _ in range(20)]
    worker = build_worker(app, get_redis(), "simple")
    now = [100.0]
    worker.clock = lambda: now[0]  # the whole drain happens within one second

    worker.work(burst=True, logging_level="WARNING")

    assert db.session.execute(select(func.count()).where(Run.id.in_(ids), Run.status == "succeeded")).scalar() == 20
    # RQ alone would send 3 worker beats per job (before and after each dequeue, after each job): 61 here.
    assert beats.count("worker") == 1
    assert beats.count("job") >= 20  # RQ's job monitoring (a beat on a pipeline, per job) is untouched

    now[0] += 1.0
    worker.heartbeat()
    assert beats.count("worker") == 2


def test_an_idle_wait_ends_before_the_key_a_job_shortened_expires(app, runs):
    worker = build_worker(app, get_redis(), "simple")
    runs.submit(policy={"timeout_s": 1})  # the shortest timeout gives the shortest key life during a job
    (job,) = Queue(queueing.RUN_QUEUE, connection=get_redis()).jobs
    # A job's preparation sets the worker key to live get_heartbeat_ttl(job) s; the worker beats again (and
    # restores worker_ttl) at the latest when an idle wait times out.
    assert worker.dequeue_timeout < worker.get_heartbeat_ttl(job)
    assert worker.dequeue_timeout <= 15  # and a Redis that lost its data knows the worker again within it


def test_suspension_is_checked_once_per_second_and_still_stops_a_worker(app, runs, monkeypatch):
    checks = []
    real = BaseWorker.check_for_suspension

    def counted(self, burst):
        checks.append(burst)
        return real(self, burst)

    monkeypatch.setattr(BaseWorker, "check_for_suspension", counted)
    ids = [runs.submit() for _ in range(10)]
    worker = build_worker(app, get_redis(), "simple")
    worker.clock = lambda: 100.0
    worker.work(burst=True, logging_level="WARNING")
    assert runs.status(ids[-1]) == "succeeded" and len(checks) == 1  # RQ alone: once per job, 11 here

    waiting = runs.submit()
    suspend(get_redis())
    stopped = build_worker(app, get_redis(), "simple")
    stopped.work(burst=True, logging_level="WARNING")  # a suspended burst worker leaves at its first check
    assert runs.status(waiting) == "pending"


def test_a_worker_says_again_that_it_exists_once_redis_forgot_it(app, redis_url):
    """The embedded Redis restarted without its worker registrations: workers ran on, the Workers page said none."""
    worker = build_worker(app, get_redis(), "simple")
    now = [100.0]
    worker.clock = lambda: now[0]
    worker.register_birth()
    worker.set_state("idle")
    reader = redis.Redis.from_url(redis_url)
    for forgotten in (lambda: reader.delete("rq:workers"), reader.flushdb):  # the set only; then everything
        forgotten()
        now[0] += 1.0
        worker.heartbeat()
        [found] = Worker.all(connection=reader)
        assert (found.name, found.queue_names(), found.hostname) == (worker.name, worker.queue_names(),
                                                                     worker.hostname)
        assert found.get_state() == "idle" and found.birth_date is not None
        assert reader.ttl(worker.key) > 0


def test_a_worker_starts_rqs_scheduler_again_within_seconds_once_it_died(app, redis_url):
    """RQ's scheduler child died with its Redis connection (a Redis restart) and RQ started it again only at its
    maintenance, 10 minutes on: delayed retries waited for the reconciler meanwhile, 10 s late each."""
    worker = build_worker(app, get_redis(), "simple")
    now = [100.0]
    worker.clock = lambda: now[0]
    worker.register_birth()
    worker.scheduler = RQScheduler(worker.queues, connection=worker.connection)
    worker.heartbeat()  # its first beat takes the locks and starts the child, as RQ's start does
    first = worker.scheduler._process
    try:
        assert first is not None and first.is_alive()
        first.kill()
        first.join(10)
        redis.Redis.from_url(redis_url).flushdb()  # the restarted Redis knows no lock
        now[0] += 1.0
        worker.heartbeat()
        assert worker.scheduler._process is first  # checked every 10 s, not at every beat
        now[0] += worker.SCHEDULER_CHECK_S
        worker.heartbeat()
        assert worker.scheduler._process is not first and worker.scheduler._process.is_alive()
    finally:
        for process in {first, worker.scheduler._process}:
            if process is not None and process.is_alive():
                process.kill()
                process.join(10)
