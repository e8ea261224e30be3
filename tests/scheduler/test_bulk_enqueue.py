"""Bulk-queued first attempts are the jobs RQ itself would have queued, and real workers run them."""

import zlib
from datetime import UTC, datetime

from rq import Queue
from rq.job import Job
from rq.utils import utcformat

from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.engine import bulk_enqueue, queueing
from console.services.scheduling import planner

# Set per job at the moment of queueing; they differ between any two jobs.
MOMENTS = {b"created_at", b"enqueued_at"}


def test_a_bulk_queued_job_is_the_job_rq_would_have_queued(app):
    connection = get_redis()
    queueing.enqueue_first_attempts([(7, 30), (8, 30)])
    ours = connection.hgetall("rq:job:run-7-s1-a0")
    theirs_data = Queue.prepare_data(queueing.ENTRY_POINT, args=(9, 0), job_id="run-9-s1-a0", timeout=90,
                                     **queueing.JOB_OPTIONS)
    Queue(queueing.RUN_QUEUE, connection=connection).enqueue_many([theirs_data])
    theirs = connection.hgetall("rq:job:run-9-s1-a0")
    assert set(ours) == set(theirs)
    different = {field for field in ours if ours[field] != theirs[field]}
    assert different == MOMENTS | {b"data", b"description"}
    assert ours[b"description"] == b"jobs.execute.run_attempt(7, 0)"
    loads = Queue(queueing.RUN_QUEUE, connection=connection).serializer.loads
    assert loads(zlib.decompress(ours[b"data"])) == (queueing.ENTRY_POINT, None, (7, 0), {})
    assert loads(zlib.decompress(theirs[b"data"])) == (queueing.ENTRY_POINT, None, (9, 0), {})
    job = Job.fetch("run-7-s1-a0", connection=connection)
    assert (job.func_name, job.args, job.timeout, job.origin) == (queueing.ENTRY_POINT, (7, 0), 90, "default")
    assert job.get_status() == "queued"
    queue = Queue(queueing.RUN_QUEUE, connection=connection)
    assert queue.job_ids == ["run-7-s1-a0", "run-8-s1-a0", "run-9-s1-a0"]
    assert queueing.RUN_QUEUE in [q.name for q in Queue.all(connection=connection)]


def test_each_call_stamps_its_own_moments_though_the_template_is_built_once(app, monkeypatch):
    connection = get_redis()
    for run_id, moment in ((7, datetime(2026, 11, 29, 9, 0, 1, 5, tzinfo=UTC)),
                           (8, datetime(2026, 11, 29, 9, 0, 2, 7, tzinfo=UTC))):
        monkeypatch.setattr(bulk_enqueue, "now", lambda moment=moment: moment)
        queueing.enqueue_first_attempts([(run_id, 30)])
        stored = connection.hgetall(f"rq:job:run-{run_id}-s1-a0")
        assert {stored[field].decode() for field in MOMENTS} == {utcformat(moment)}
    assert Job.fetch("run-8-s1-a0", connection=connection).enqueued_at == datetime(2026, 11, 29, 9, 0, 2, 7, tzinfo=UTC)


def test_a_burst_of_firings_is_run_by_a_real_worker(register, runs, workers, clock):
    tasks = [register(f"task-{i}") for i in range(30)]
    outcomes = planner.fire([planner.Firing(task.id, clock()) for task in tasks], Actor("scheduler"), clock)
    assert {o.status for o in outcomes} == {"created"}
    workers()
    for outcome in outcomes:
        assert runs.wait(outcome.run_id, "succeeded").executions == 1
