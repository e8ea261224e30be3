"""What Rebound reaches into in RQ still holds: the job hash its Lua enqueue writes, the worker methods it overrides."""

import inspect
import re
import zlib
from pathlib import Path

from rq import Queue, SimpleWorker, executions
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.rate_limit import release_slot
from rq.results import Result
from rq.worker import BaseWorker

from console.processes.worker import WORKER_CLASSES, FewerRoundTripsMixin, SparseHousekeepingMixin, build_worker
from console.redis_conn import get_redis
from console.services.engine import bulk_enqueue, queueing
from tests.helpers import wait_for

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
    # The run is committed succeeded inside the job; RQ marks the job finished just after it returns.
    wait_for(lambda: [job.get_status() for job in Job.fetch_many(
        [queueing.job_id(run_id, 1, 0) for run_id in run_ids], connection=get_redis())] == [JobStatus.FINISHED] * 2,
        10, 0.05, "RQ to record both jobs finished")


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
    assert worker.dequeue_timeout == worker.IDLE_WAKE_S == 15


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


def test_what_fewer_round_trips_mixin_mirrors_still_has_rqs_signatures_and_shape():
    # FewerRoundTripsMixin does in its own pipelines what these RQ methods do in theirs: any change to them shows here.
    def names(function):
        return list(inspect.signature(function).parameters)

    assert names(BaseWorker.prepare_execution) == ["self", "job"]
    assert names(BaseWorker.prepare_job_execution) == ["self", "job", "remove_from_intermediate_queue"]
    assert names(BaseWorker.handle_job_success) == ["self", "job", "queue", "started_job_registry", "execution"]
    assert names(Execution.create) == ["job", "ttl", "pipeline", "worker_name"]
    assert names(Job.prepare_for_execution) == ["self", "worker_name", "pipeline"]
    assert names(Job._handle_success) == ["self", "result_ttl", "pipeline", "worker_name", "execution_id",
                                          "execution_started_at", "execution_ended_at"]
    assert names(Job.cleanup)[:4] == ["self", "ttl", "pipeline", "remove_from_queue"]
    assert names(release_slot) == ["job"]
    # RQ's own bodies: what the mixin writes in their place.
    prepared = inspect.getsource(executions.prepare_execution)
    for call in ("Execution.create(job, heartbeat_ttl, pipeline=pipeline, worker_name=worker.name)",
                 "worker.executions[execution.id] = execution", "set_state(WorkerStatus.BUSY, pipeline=pipeline)"):
        assert call in prepared
    preparing = inspect.getsource(BaseWorker.prepare_job_execution)
    for call in ("self.heartbeat(heartbeat_ttl, pipeline=pipeline)", "job.heartbeat(now(), heartbeat_ttl",
                 "job.prepare_for_execution(self.name, pipeline=pipeline)", "pipeline.persist(job.key)",
                 "pipeline.lrem(queue.intermediate_queue_key, 1, job.id)"):
        assert call in preparing
    assert preparing.count("pipeline.") == 3  # persist, lrem, execute: nothing else written beside the calls above
    succeeded = inspect.getsource(BaseWorker.handle_job_success)
    for call in ("pipeline.watch(job.dependents_key)", "queue.move_dependents_to_ready(job, pipeline=pipeline)",
                 "self.increment_successful_job_count(pipeline=pipeline)",
                 "self.increment_total_working_time(job.ended_at - job.started_at, pipeline)",
                 "job._handle_success(", "job.cleanup(result_ttl, pipeline=pipeline, remove_from_queue=False)",
                 "self.cleanup_execution(job, pipeline=pipeline, execution=execution)", "release_slot(job)",
                 "Repeat.schedule(job, queue, pipeline=pipeline)"):
        assert call in succeeded
    # The order RQ calls them in: the execution prepared, then the job (once per job), then success and "idle".
    executing = inspect.getsource(SimpleWorker.execute_job)
    assert executing.index("self.prepare_execution(job)") < executing.index("self.perform_job(")
    performing = inspect.getsource(BaseWorker.perform_job)
    assert "self.prepare_job_execution(job, remove_from_intermediate_queue)" in performing
    assert "remove_from_intermediate_queue = len(self.queues) == 1" in performing
    for cls in WORKER_CLASSES.values():
        for name in ("prepare_execution", "prepare_job_execution", "handle_job_success"):
            assert inspect.getattr_static(cls, name) is inspect.getattr_static(FewerRoundTripsMixin, name)


def _redis_shape(connection, worker_name: str) -> dict:
    """Every key RQ left, with its type, its fields or members, and whether it expires; names made comparable."""
    def same(value) -> str:
        text = value.decode() if isinstance(value, bytes) else str(value)
        return re.sub(r"[0-9a-f]{32}", "<id>", text.replace(worker_name, "<worker>"))

    shape = {}
    for key in connection.keys("*"):
        kind = connection.type(key).decode()
        if kind == "hash":
            content = sorted(same(field) for field in connection.hkeys(key))
        elif kind == "zset":
            content = sorted(same(member) for member in connection.zrange(key, 0, -1))
        elif kind == "set":
            content = sorted(same(member) for member in connection.smembers(key))
        elif kind == "list":
            content = [same(item) for item in connection.lrange(key, 0, -1)]
        elif kind == "stream":
            content = [sorted(same(field) for field in fields) for _, fields in connection.xrange(key)]
        else:
            content = same(connection.get(key))
        shape[same(key)] = (kind, content, connection.ttl(key) > 0)
    return shape


def _run_one_job(worker_class, app, queues) -> tuple[dict, dict, dict]:
    connection = get_redis()
    connection.flushdb()
    Queue(queueing.RUN_QUEUE, connection=connection).enqueue("jobs.handlers.demo.noop", None, job_id="same-job",
                                                             result_ttl=60)
    worker = worker_class(queues, connection=connection, name="w-" + worker_class.__name__)
    worker.flask_app = app
    worker.work(burst=True, logging_level="WARNING")
    return (_redis_shape(connection, worker.name), connection.hgetall("rq:job:same-job"),
            connection.hgetall(worker.key))


def test_a_job_leaves_redis_as_rqs_own_worker_leaves_it(app):
    # The mixin's two round trips write what RQ's five do: the same keys, fields, members and expiries.
    rq_shape, rq_job, rq_worker = _run_one_job(SimpleWorker, app, queueing.QUEUES)
    our_shape, our_job, our_worker = _run_one_job(WORKER_CLASSES["simple"], app, queueing.QUEUES)
    assert our_shape == rq_shape
    assert our_job[b"status"] == rq_job[b"status"] == b"finished"
    assert our_job[b"worker_name"] == b"w-ReboundSimpleWorker"
    for field in (b"state", b"successful_job_count", b"failed_job_count"):
        assert our_worker.get(field) == rq_worker.get(field), field
    assert our_worker[b"state"] == b"idle" and our_worker[b"successful_job_count"] == b"1"
    assert Job.fetch("same-job", connection=get_redis()).latest_result().type == Result.Type.SUCCESSFUL
    # With one queue RQ also takes the job off the queue's intermediate list, in its own preparation.
    assert _run_one_job(WORKER_CLASSES["simple"], app, [queueing.RUN_QUEUE])[0] == \
        _run_one_job(SimpleWorker, app, [queueing.RUN_QUEUE])[0]


def test_rebound_queues_no_job_with_rq_dependents_or_repeats():
    # FewerRoundTripsMixin ends a job without reading its dependents: none may exist. (A repeat goes to RQ's method.)
    root = Path(__file__).resolve().parents[2]
    sources = [*root.joinpath("console").rglob("*.py"), *root.joinpath("jobs").rglob("*.py")]
    assert len(sources) > 100
    for source in sources:
        text = source.read_text()
        for word in ("depends_on", "Dependency(", "Repeat("):
            assert word not in text, f"{source.relative_to(root)} uses RQ's {word}"


def test_rq_s_worker_raises_its_client_s_timeout_only_in_set_connection():
    # The Workers page reads workers as queues._Observed, whose _set_connection leaves the console's client alone.
    assert "connection = self._set_connection(connection)" in inspect.getsource(BaseWorker.__init__)
    assert "socket_timeout" not in inspect.getsource(BaseWorker.__init__)
    assert "'socket_timeout'" in inspect.getsource(BaseWorker._set_connection)
    assert list(inspect.signature(BaseWorker._set_connection).parameters) == ["self", "connection"]


def test_what_the_worker_s_own_beat_sends_in_one_pipeline_is_rqs():
    # SparseHousekeepingMixin.heartbeat sends RQ's beat on a pipeline with RQ's registration and, for a hash Redis
    # lost, RQ's own serialized fields: each still written by these, with these arguments.
    from rq import worker_registration

    beat = inspect.getsource(BaseWorker.heartbeat)
    assert "connection: Redis | Pipeline = pipeline if pipeline is not None else self.connection" in beat
    assert list(inspect.signature(worker_registration.register).parameters) == ["worker", "pipeline"]
    assert "sadd(worker.redis_workers_keys, worker.key)" in inspect.getsource(worker_registration.register)
    assert "pipeline.hset(key, mapping=self.serialize())" in inspect.getsource(BaseWorker.register_birth)


def test_a_simple_worker_runs_each_job_through_execute_job_in_its_own_thread():
    # BusyBeatMixin wraps execute_job(job, queue) with a beat thread for the jobs that are no run's attempt: it must
    # be where a SimpleWorker runs a job, in the worker's main thread (perform_job, no fork), and heartbeat must take
    # a timeout that renews the key.
    assert list(inspect.signature(SimpleWorker.execute_job).parameters) == ["self", "job", "queue"]
    assert "self.perform_job(job, queue" in inspect.getsource(SimpleWorker.execute_job)
    assert "fork_work_horse" not in inspect.getsource(SimpleWorker.execute_job)
    assert list(inspect.signature(BaseWorker.heartbeat).parameters)[:2] == ["self", "timeout"]
