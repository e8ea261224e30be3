"""A worker's per-job overhead: one database connection kept while busy; RQ's writes that say nothing new skipped."""

import signal
import threading

import pytest
import redis
from redis.client import Pipeline
from rq import Callback, Queue
from rq.job import Job, JobStatus
from rq.worker import WorkerStatus
from sqlalchemy import event, func, select
from sqlalchemy.exc import OperationalError

from console import metrics
from console.extensions import db
from console.models import Run
from console.processes import worker as workers
from console.processes.worker import build_worker
from console.redis_conn import get_redis
from console.services.engine import execute as execute_module
from console.services.engine import queueing

called_back = []


def noted(job, connection, result):
    """An RQ success callback: notes that it ran."""
    called_back.append(job.id)


def _succeeded(ids) -> int:
    return db.session.execute(select(func.count()).where(Run.id.in_(ids), Run.status == "succeeded")).scalar()


@pytest.fixture
def checkouts(app):
    """Count the pool check-outs made by this thread (the worker's; not the heartbeat or metrics threads)."""
    seen = []

    def counted(*_):
        if threading.current_thread() is threading.main_thread():
            seen.append(1)

    event.listen(db.engine.pool, "checkout", counted)
    yield seen
    event.remove(db.engine.pool, "checkout", counted)


def test_a_busy_worker_runs_every_job_on_one_connection(app, runs, checkouts, monkeypatch):
    pings = []
    monkeypatch.setattr(workers, "_alive", lambda connection: pings.append(connection) or True)
    ids = [runs.submit() for _ in range(20)]
    checkouts.clear()  # the submits' own
    worker = build_worker(app, get_redis(), "simple")
    worker.clock = lambda: 100.0  # the whole drain within one second: no job follows an idle connection

    worker.work(burst=True, logging_level="WARNING")

    # A check-out per job before (and on PostgreSQL the pool's pre-ping: a round trip each).
    assert len(checkouts) == 1
    assert _succeeded(ids) == 20
    assert pings == []
    assert worker._connection is None  # closed when the worker stopped


def test_an_idle_connection_is_pinged_and_a_dead_one_replaced(app, runs, checkouts, monkeypatch):
    answers = []
    monkeypatch.setattr(workers, "_alive", lambda connection: answers.pop(0))
    now = [100.0]
    worker = build_worker(app, get_redis(), "simple")
    worker.clock = lambda: now[0]
    first = runs.submit()
    checkouts.clear()
    worker.work(burst=True, logging_level="WARNING")
    assert len(checkouts) == 1 and runs.status(first) == "succeeded"

    # Idle for a second: pinged before the next job; it answers, so it is kept.
    now[0] += 1.0
    answers.append(True)
    second = runs.submit()
    checkouts.clear()
    worker._connection_used_at = 99.0  # as if the first burst's connection were still kept (teardown closed it)
    worker._connection = kept = db.engine.connect()
    worker.work(burst=True, logging_level="WARNING")
    assert len(checkouts) == 1 and answers == [] and kept.closed  # its one check-out: `kept`, above
    assert runs.status(second) == "succeeded"

    # A server that dropped the connection while the worker waited: the ping fails, a new one is opened.
    kept = worker._job_connection()
    now[0] += 5.0
    answers.append(False)
    replaced = worker._job_connection()
    assert replaced is not kept and kept.closed and not replaced.closed
    worker._job_ended(replaced)
    third = runs.submit()
    worker.work(burst=True, logging_level="WARNING")
    assert runs.status(third) == "succeeded"


def test_a_connection_invalidated_by_an_error_is_replaced_without_a_ping(app, monkeypatch):
    monkeypatch.setattr(workers, "_alive", lambda connection: pytest.fail("no ping: it is known to be gone"))
    worker = build_worker(app, get_redis(), "simple")
    worker.clock = lambda: 100.0
    with app.app_context():
        broken = worker._job_connection()
        broken.invalidate()  # what SQLAlchemy does on a disconnect error
        fresh = worker._job_connection()
        assert fresh is not broken and not fresh.invalidated
        worker._drop_connection()


def test_a_job_leaves_no_transaction_or_isolation_level_behind(app, runs):
    worker = build_worker(app, get_redis(), "simple")
    with app.app_context():
        connection = worker._job_connection()
        connection.execution_options(isolation_level="AUTOCOMMIT" if connection.dialect.name == "postgresql"
                                     else "READ UNCOMMITTED")
        connection.exec_driver_sql("SELECT 1")
        worker._job_ended(connection)
        assert not connection.in_transaction()
        assert connection.get_execution_options().get("isolation_level",
                                                      connection.default_isolation_level) == \
            connection.default_isolation_level
        worker._drop_connection()


def test_the_worker_state_is_written_only_when_it_changes(app, runs, monkeypatch):
    written = []
    worker = build_worker(app, get_redis(), "simple")
    real_command, real_queued = redis.Redis.execute_command, Pipeline.pipeline_execute_command

    def noted(args):
        if args[:3] == ("HSET", worker.key, "state"):
            written.append(args[3])

    def command(self, *args, **options):
        if not isinstance(self, Pipeline):
            noted(args)
        return real_command(self, *args, **options)

    def queued(self, *args, **options):
        noted(args)
        return real_queued(self, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", command)
    monkeypatch.setattr(Pipeline, "pipeline_execute_command", queued)
    ids = [runs.submit() for _ in range(10)]
    worker.work(burst=True, logging_level="WARNING")

    assert _succeeded(ids) == 10
    # RQ alone writes idle before each dequeue and again after each job: 3 writes per job, 2 of them "idle".
    assert written.count("busy") == 10
    assert written.count("idle") == 11  # the first wait, then after each job; the dequeue's repeat is skipped
    assert get_redis().hget(worker.key, "state") == b"idle" and worker.get_state() == "idle"


def test_a_job_is_not_stamped_again_when_it_returns_unless_it_has_a_callback(app, runs, monkeypatch):
    beats = []
    real = Job.heartbeat

    def counted(self, timestamp, ttl, pipeline=None, xx=False):
        beats.append((self.id, pipeline is None))
        return real(self, timestamp, ttl, pipeline, xx)

    monkeypatch.setattr(Job, "heartbeat", counted)
    run_id = runs.submit()
    (job_id,) = Queue(queueing.RUN_QUEUE, connection=get_redis()).job_ids
    called_back.clear()
    called = Queue(queueing.RUN_QUEUE, connection=get_redis()).enqueue(
        "jobs.handlers.demo.noop", None, on_success=Callback(noted))
    worker = build_worker(app, get_redis(), "simple")
    worker.work(burst=True, logging_level="WARNING")

    assert runs.status(run_id) == "succeeded"
    job = Job.fetch(job_id, connection=get_redis())
    assert job.get_status() == JobStatus.FINISHED and job.ended_at is not None  # RQ still records its end
    # Rebound's job: stamped in its preparation only (a pipelined beat); the callback's job also once more alone.
    assert (job_id, True) not in beats and (job_id, False) in beats
    assert (called.id, True) in beats
    assert called_back == [called.id]


def test_a_connection_the_server_dropped_between_jobs_is_replaced_and_the_claim_made(app, runs, monkeypatch):
    monkeypatch.setattr(workers, "_alive", lambda connection: pytest.fail("no ping: the worker is busy"))
    worker = build_worker(app, get_redis(), "simple")
    worker.clock = lambda: 100.0
    first = runs.submit()
    with app.app_context():
        kept = worker._connection = db.engine.connect()
        worker._job_ended(kept)
    if kept.dialect.name == "postgresql":
        pid = kept.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        kept.rollback()
        with db.engine.connect() as other:
            other.exec_driver_sql(f"SELECT pg_terminate_backend({pid})")
            other.commit()
    else:
        # SQLite cannot lose its server: close the driver's connection under SQLAlchemy's feet instead.
        kept.connection.dbapi_connection.close()
    worker.work(burst=True, logging_level="WARNING")
    assert runs.status(first) == "succeeded"
    assert runs.get(first).executions == 1


def test_a_job_costs_the_worker_five_redis_round_trips(app, runs, monkeypatch):
    sent = []
    real_command, real_pipeline = redis.Redis.execute_command, Pipeline.execute

    def command(self, *args, **options):
        if threading.current_thread() is threading.main_thread() and not isinstance(self, Pipeline):
            sent.append(args[0])
        return real_command(self, *args, **options)

    def pipeline(self, *args, **options):
        if threading.current_thread() is threading.main_thread():
            sent.append("pipeline")
        return real_pipeline(self, *args, **options)

    ids = [runs.submit() for _ in range(10)]
    worker = build_worker(app, get_redis(), "simple")
    worker.clock = lambda: 100.0  # no beat or suspension check falls due during the drain
    monkeypatch.setattr(metrics._batch, "interval_s", 3600.0)  # a worker's counts go once a second, not per job
    monkeypatch.setattr(redis.Redis, "execute_command", command)
    monkeypatch.setattr(Pipeline, "execute", pipeline)
    worker.work(burst=True, logging_level="WARNING")
    monkeypatch.undo()
    metrics.flush()

    assert _succeeded(ids) == 10
    second_job = sent.index("LPOP", sent.index("LPOP") + 1)  # the first job also asks the server's version once
    per_job = sent[second_job:second_job + 5]
    # Take the job and read it; start it (RQ's execution and the job's status in one pipeline); the breaker's
    # state; end it (RQ's success and the worker's "idle" in one MULTI/EXEC). RQ's own worker sends nine.
    assert per_job == ["LPOP", "HGETALL", "pipeline", "GET", "pipeline"]
    assert sent[second_job:second_job + 45] == per_job * 9


def test_a_stop_asked_while_a_job_s_success_is_written_stops_the_worker_after_that_job(app, runs, monkeypatch):
    first, second = runs.submit(), runs.submit()
    worker = build_worker(app, get_redis(), "simple")
    real_execute = Pipeline.execute
    asked = []

    def execute(pipeline, *args, **kwargs):
        # SIGTERM's handler, run where a signal can land: while the success's transaction is on its way.
        ending = any(args == ("HSET", worker.key, "state", WorkerStatus.IDLE) for args, _ in pipeline.command_stack)
        if ending and not asked and threading.current_thread() is threading.main_thread():
            asked.append(worker.get_state())
            worker.request_stop(signal.SIGTERM, None)
        return real_execute(pipeline, *args, **kwargs)

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(Pipeline, "execute", execute)
    try:
        worker.work(burst=True, logging_level="WARNING")
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

    # The stop waited for the job's end, as it does while a handler runs, and was kept: the worker took no
    # other job. Raised inside the bookkeeping it had failed the finished job in RQ and been lost.
    assert asked == [WorkerStatus.BUSY]
    assert (runs.status(first), runs.status(second)) == ("succeeded", "pending")
    assert Job.fetch(f"run-{first}-s1-a0", connection=get_redis()).get_status() == JobStatus.FINISHED
    assert worker.get_state() == WorkerStatus.IDLE


def test_a_commit_the_database_refused_leaves_the_next_job_a_clean_connection(app, runs, monkeypatch):
    """A full disk refused a claim's COMMIT: its transaction, left on the kept connection, failed every later job of
    that worker ("already initialized a Transaction"), which stayed up and idle until restarted."""
    first, second = runs.submit(), runs.submit()
    dialect = type(db.engine.dialect)
    real_commit, refused = dialect.do_commit, []

    def do_commit(self, dbapi_connection):
        if not refused:
            refused.append(1)
            raise self.loaded_dbapi.OperationalError("database or disk is full")
        return real_commit(self, dbapi_connection)

    monkeypatch.setattr(dialect, "do_commit", do_commit)
    worker = build_worker(app, get_redis(), "simple")
    worker.work(burst=True, logging_level="WARNING")

    assert refused and runs.status(second) == "succeeded"
    # On SQLite the refused claim never reached the database, and the reconciler queues the run again; PostgreSQL's
    # claim is one statement in autocommit, durable before any COMMIT: the run waits to be found lost.
    assert runs.status(first) == ("running" if db.engine.dialect.name == "postgresql" else "pending")


def test_a_database_that_does_not_answer_as_a_job_starts_fails_that_job_not_the_worker(app, runs, monkeypatch):
    """A PostgreSQL restart: the connection a job starts with was opened outside RQ's handling of the job, and its
    error stopped the worker (the supervisor restarted it, backing off up to 16 s after several)."""
    first, second = runs.submit(), runs.submit()
    real_connect, refused = type(db.engine).connect, []

    def connect(engine):
        if len(refused) < 2:  # the job's connection, then the session's own try within the job
            refused.append(1)
            raise OperationalError("connect", {}, Exception("the database system is starting up"))
        return real_connect(engine)

    monkeypatch.setattr(type(db.engine), "connect", connect)
    worker = build_worker(app, get_redis(), "simple")
    worker.CONNECT_PATIENCE_S = 0  # past its patience at once (the next test waits), the claim's too
    monkeypatch.setattr(execute_module, "BOOKKEEPING_PATIENCE_S", 0)
    worker.work(burst=True, logging_level="WARNING")  # returns: it did not stop on the error

    assert (runs.status(first), runs.status(second)) == ("pending", "succeeded")  # the reconciler queues the first


def test_a_job_waits_out_a_database_restart_before_it_starts(app, runs, monkeypatch):
    """Failing at once, a worker ran its whole queue into RQ's failed jobs within a second of a restart."""
    run_id = runs.submit()
    real_connect, refused = type(db.engine).connect, []

    def connect(engine):
        if len(refused) < 3:
            refused.append(1)
            raise OperationalError("connect", {}, Exception("the database system is starting up"))
        return real_connect(engine)

    monkeypatch.setattr(type(db.engine), "connect", connect)
    worker = build_worker(app, get_redis(), "simple")
    slept = []
    worker.sleep = slept.append
    worker.work(burst=True, logging_level="WARNING")

    assert runs.status(run_id) == "succeeded" and slept == [0.1, 0.2, 0.4]
