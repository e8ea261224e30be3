"""A worker beats while it works a job that is no run's attempt, so the Workers page can tell it alive (helper 170).

A real worker on a real Redis; the job only sleeps, longer than a beat's interval.
"""

from datetime import timedelta

from rq import Queue, Worker
from rq.job import Job

from console.processes.worker import BusyBeatMixin
from console.redis_conn import get_redis
from console.services.engine import queueing
from tests.helpers import wait_for


def test_a_worker_beats_while_a_maintenance_job_works(workers):
    worker_process = workers()
    job = Queue(queueing.MAINTENANCE_QUEUE, connection=get_redis()).enqueue("time.sleep", BusyBeatMixin.BUSY_BEAT_S * 3)

    def working():
        found = [w for w in Worker.all(connection=get_redis()) if w.pid == worker_process.pid]
        return found[0] if found and found[0].get_current_job_id() == job.id else None

    wait_for(working, 20, what="the worker to take the job")
    started = Job.fetch(job.id, connection=get_redis()).started_at
    # A beat later than the job's start, read while the worker still works it (RQ beats only between jobs).
    wait_for(lambda: (w := working()) is not None and w.last_heartbeat - started > timedelta(
        seconds=BusyBeatMixin.BUSY_BEAT_S), 20, what="a beat while the job works")
