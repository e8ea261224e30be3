"""A run whose job a worker took and never claimed (it died first) is queued again within the requeue delay."""

from datetime import timedelta

from rq import Queue
from rq.registry import StartedJobRegistry
from sqlalchemy import update

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Run
from console.processes.worker import build_worker
from console.redis_conn import get_redis
from console.services.engine import queueing
from console.services.engine.reconcile import reconcile
from console.services.settings import setting


def test_a_job_taken_by_a_worker_that_died_before_its_claim_is_queued_again(app, runs, clock):
    """A database restart killed workers between taking a job and claiming its run: the run read "waiting for a
    free worker" for 10–12 minutes, until RQ's own cleanup freed the job, while both workers sat idle."""
    run_id = runs.submit()
    db.session.execute(update(Run).where(Run.id == run_id).values(enqueued_at=utcnow() - timedelta(minutes=1)))
    db.session.commit()  # it waited in the queue a while: past the requeue delay
    taker = build_worker(app, get_redis(), "simple")
    job, _ = taker.dequeue_job_and_maintain_ttl(timeout=None)
    taker.prepare_execution(job)  # taken, marked started; then the worker dies before its claim
    started = StartedJobRegistry(job.origin, connection=get_redis())
    assert job.id == queueing.job_id(run_id, 1, 0) and started.get_job_count(cleanup=False) == 1

    clock.set(utcnow())
    assert reconcile(clock).requeued == []  # taken moments ago: its worker is about to claim it
    clock.advance(setting("REQUEUE_AFTER_S") + 1)
    assert reconcile(clock).requeued == [run_id]
    assert [event.reason for event in runs.events(run_id, "requeued")] == ["job_abandoned"]
    assert Queue(job.origin, connection=get_redis()).get_job_ids() == [job.id]
    assert started.get_job_count(cleanup=False) == 0  # RQ's cleanup will not take the next execution for it
    assert reconcile(clock).requeued == []  # queued now: once

    get_redis().delete(taker.key)  # the dead worker's key expired
    build_worker(app, get_redis(), "simple").work(burst=True, logging_level="WARNING")
    assert runs.status(run_id) == "succeeded" and runs.get(run_id).executions == 1
