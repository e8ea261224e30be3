"""What Rebound reaches into in RQ still holds: the job hash its Lua enqueue writes, the worker methods it overrides."""

import inspect
import zlib

from rq import Queue, SimpleWorker
from rq.job import Job, JobStatus
from rq.worker import BaseWorker

from console.processes.worker import WORKER_CLASSES, SparseHousekeepingMixin, build_worker
from console.redis_conn import get_redis
from console.services.engine import bulk_enqueue, queueing

# Set per job at the moment of queueing: they differ between any two jobs.
MOMENTS = {b"created_at", b"enqueued_at"}
# Read back through RQ's own parsing: what a worker, a registry or the console sees of a job.
AS_RQ_READS_IT = ("func_name", "kwargs", "origin", "timeout", "result_ttl", "failure_ttl", "ttl", "meta",
                  "retries_left", "retry_intervals", "dependency_ids", "allow_dependency_failures", "is_queued",
                  "success_callback", "failure_callback", "stopped_callback", "has_rate_limit", "group_id",
                  "is_ready_to_enqueue", "repeats_left")


def _lua_and_rq_jobs():
    """Queue runs 7 and 8 by the Lua path, 9 by RQ's Queue.enqueue and 10 by its enqueue_many, all alike."""
    connection = get_redis()
    queueing.enqueue_many_now([(7, 1, 0, 30), (8, 1, 0, 30)])  # more than one: the burst path, by Lua
    queue = Queue(queueing.RUN_QUEUE, connection=connection)
    queue.enqueue(queueing.ENTRY_POINT, 9, 0, job_id="run-9-s1-a0", job_timeout=90, **queueing.JOB_OPTIONS)
    queue.enqueue_many([Queue.prepare_data(queueing.ENTRY_POINT, args=(10, 0), job_id="run-10-s1-a0", timeout=90,
                                           **queueing.JOB_OPTIONS)])
    return [connection.hgetall(f"rq:job:run-{run_id}-s1-a0") for run_id in (7, 9, 10)]


def test_a_lua_queued_job_hash_has_the_fields_and_values_rq_writes(app):
    ours, *theirs = _lua_and_rq_jobs()
    loads = Queue(queueing.RUN_QUEUE, connection=get_redis()).serializer.loads
    for run_id, rqs in zip((9, 10), theirs, strict=True):
        assert set(ours) == set(rqs)
        assert {field for field in ours if ours[field] != rqs[field]} == MOMENTS | {b"data", b"description"}
        assert loads(zlib.decompress(rqs[b"data"])) == (queueing.ENTRY_POINT, None, (run_id, 0), {})
    assert ours[b"description"] == b"jobs.execute.run_attempt(7, 0)"
    assert loads(zlib.decompress(ours[b"data"])) == (queueing.ENTRY_POINT, None, (7, 0), {})


def test_rq_reads_a_lua_queued_job_back_as_it_reads_its_own(app):
    _lua_and_rq_jobs()
    ours, theirs = Job.fetch_many(["run-7-s1-a0", "run-9-s1-a0"], connection=get_redis())
    assert {name: getattr(ours, name) for name in AS_RQ_READS_IT} == {name: getattr(theirs, name)
                                                                     for name in AS_RQ_READS_IT}
    assert (ours.args, theirs.args) == ((7, 0), (9, 0))
    assert ours.get_status() == theirs.get_status() == JobStatus.QUEUED
    assert (ours.func_name, ours.timeout, ours.origin, ours.result_ttl) == (queueing.ENTRY_POINT, 90, "default", 60)
    assert Queue(queueing.RUN_QUEUE, connection=get_redis()).job_ids == [f"run-{n}-s1-a0" for n in (7, 8, 9, 10)]
    assert queueing.RUN_QUEUE in [queue.name for queue in Queue.all(connection=get_redis())]


def test_a_real_rq_worker_runs_a_lua_queued_job_and_records_it_as_rq_does(runs, workers):
    run_ids = [runs.submit() for _ in range(2)]
    Queue(queueing.RUN_QUEUE, connection=get_redis()).empty()  # submit queued them; queue them again, by Lua only
    queueing.enqueue_many_now([(run_id, 1, 0, 30) for run_id in run_ids])
    workers()
    for run_id in run_ids:
        assert runs.wait(run_id, "succeeded").executions == 1
    jobs = Job.fetch_many([queueing.job_id(run_id, 1, 0) for run_id in run_ids], connection=get_redis())
    assert [job.get_status() for job in jobs] == [JobStatus.FINISHED] * 2


def test_the_worker_methods_sparse_housekeeping_overrides_keep_their_signatures():
    empty = inspect.Parameter.empty
    assert [(parameter.name, parameter.default) for parameter in
            inspect.signature(BaseWorker.heartbeat).parameters.values()] == [
        ("self", empty), ("timeout", None), ("pipeline", None)]
    assert list(inspect.signature(BaseWorker.check_for_suspension).parameters) == ["self", "burst"]
    assert isinstance(inspect.getattr_static(BaseWorker, "dequeue_timeout"), property)
    assert list(inspect.signature(BaseWorker.get_heartbeat_ttl).parameters)[:2] == ["self", "job"]
    assert [(parameter.name, parameter.default) for parameter in
            inspect.signature(BaseWorker.set_state).parameters.values()] == [
        ("self", empty), ("state", empty), ("pipeline", None)]
    assert list(inspect.signature(BaseWorker.handle_execution_ended).parameters) == [
        "self", "job", "queue", "heartbeat_ttl"]
    for cls in WORKER_CLASSES.values():
        assert issubclass(cls, SimpleWorker)
        for name in ("heartbeat", "check_for_suspension", "dequeue_timeout", "set_state", "handle_execution_ended"):
            # Ours comes first in the lookup, and what its super() reaches is RQ's own.
            assert inspect.getattr_static(cls, name) is inspect.getattr_static(SparseHousekeepingMixin, name)
            assert inspect.getattr_static(SimpleWorker, name) is inspect.getattr_static(BaseWorker, name)


def test_a_plain_beat_keeps_the_worker_key_worker_ttl_plus_60_seconds(app):
    # The mixin skips beats for a second on the strength of this: a key that lives 7 minutes cannot lapse.
    worker = build_worker(app, get_redis(), "simple")
    worker.register_birth()
    BaseWorker.heartbeat(worker)
    assert worker.worker_ttl + 59 <= get_redis().ttl(worker.key) <= worker.worker_ttl + 60
    worker.register_death()


def test_rq_waits_for_a_job_as_long_as_dequeue_timeout_says(app):
    # The mixin shortens the wait through this property; RQ must still read it for its blocking dequeue.
    source = inspect.getsource(BaseWorker.work)
    assert "self.dequeue_timeout" in source and "self.check_for_suspension(burst)" in source
    worker = build_worker(app, get_redis(), "simple")
    assert BaseWorker.dequeue_timeout.fget(worker) == max(1, worker.worker_ttl - 15)
    assert worker.dequeue_timeout == 60


def test_a_job_payload_is_written_as_zlib_level_0_which_rq_reads_back():
    # bulk_enqueue frames the pickled call as one stored deflate block by hand (zlib.compress's setup cost more than
    # the rest of a replay); RQ's Job.restore reads `data` with zlib.decompress, which takes any valid stream.
    for size in (0, 1, 60, 255, 256, 4096, bulk_enqueue._STORED_MAX):
        data = bytes(range(256)) * (size // 256) + bytes(size % 256)
        assert bulk_enqueue.stored(data) == zlib.compress(data, 0)
        assert zlib.decompress(bulk_enqueue.stored(data)) == data
    larger = b"x" * (bulk_enqueue._STORED_MAX + 1)
    assert bulk_enqueue.stored(larger) == zlib.compress(larger)
    assert "zlib.decompress(raw_data)" in inspect.getsource(Job.restore)


def test_rq_writes_the_worker_state_only_through_set_state_and_ends_a_job_in_handle_execution_ended():
    # The mixin skips a state write that repeats the last one: nothing else may write the state meanwhile.
    for method in (BaseWorker.dequeue_job_and_maintain_ttl, SimpleWorker.execute_job, BaseWorker.heartbeat,
                   BaseWorker.prepare_job_execution, BaseWorker.handle_job_success):
        source = inspect.getsource(method)
        assert "'state'" not in source and '"state"' not in source
    assert "set_state(WorkerStatus.IDLE)" in inspect.getsource(BaseWorker.dequeue_job_and_maintain_ttl)
    assert "set_state(WorkerStatus.IDLE)" in inspect.getsource(SimpleWorker.execute_job)
    # It stamps the job's end itself, and skips the beat only: RQ's own method does just these two things,
    # and success and failure (the callbacks' timeouts) both go through it.
    ended = inspect.getsource(BaseWorker.handle_execution_ended)
    assert "job.ended_at = now()" in ended and "job.heartbeat(" in ended
    assert "self.handle_execution_ended(" in inspect.getsource(BaseWorker._finalize_success)
    assert "self.handle_execution_ended(" in inspect.getsource(BaseWorker._finalize_failure)
    assert isinstance(inspect.getattr_static(Job, "success_callback"), property)
    assert isinstance(inspect.getattr_static(Job, "failure_callback"), property)
