"""Bulk-queued first attempts stamp their own moments, and real workers run a burst of them."""

# That they are the jobs RQ itself would have queued is RQ's contract: tests/contracts/test_rq_internals.py.

from datetime import UTC, datetime

from rq.job import Job
from rq.utils import utcformat

from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.engine import bulk_enqueue, queueing
from console.services.scheduling import planner

# Set per job at the moment of queueing; they differ between any two jobs.
MOMENTS = {b"created_at", b"enqueued_at"}


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


def test_a_job_queued_again_after_it_finished_is_a_fresh_hash_that_does_not_expire(app):
    """A run released from its window is queued again under the job id that deferred it: RQ had kept that finished
    job's hash for its result_ttl (60 s), and writing over it kept the expiry, so with the workers busy a minute the
    job was gone when one was free, and the run waited a week for its window (helper 123)."""
    connection = get_redis()
    key = "rq:job:run-9-s1-a0"
    connection.hset(key, mapping={"status": "finished", "worker_name": "w1", "last_heartbeat": "2026-12-06T13:00:00Z"})
    connection.expire(key, 60)
    queueing.enqueue_now(9, 1, 0, 30)
    assert connection.ttl(key) == -1  # no expiry
    stored = connection.hgetall(key)
    assert stored[b"status"] == b"queued"
    assert stored.get(b"worker_name") == stored.get(b"last_heartbeat") == b""  # nothing of the finished job
    assert Job.fetch("run-9-s1-a0", connection=connection).get_status() == "queued"
