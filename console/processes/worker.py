"""RQ workers that run each job inside a fresh app context of an app built once."""

import contextlib
import importlib
import logging
import threading
import time

from redis.exceptions import RedisError
from rq import Queue, SimpleWorker, Worker, worker_registration
from rq.executions import Execution
from rq.job import JobStatus
from rq.rate_limit import release_slot
from rq.utils import now
from rq.worker import WorkerStatus
from sqlalchemy.exc import SQLAlchemyError

from console.extensions import PINNED, db
from console.services.engine import heartbeat, queueing, registry
from console.services.engine.execute import this_worker
from console.services.engine.queueing import QUEUES

log = logging.getLogger("rebound.worker")


class AppContextMixin:
    """Give each job its own app context and database session, on one connection the worker keeps, then clean up."""

    flask_app = None
    # A connection idle this long is pinged before a job uses it, as the pool's pre-ping would on checkout.
    PING_AFTER_IDLE_S = 1.0
    clock = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)
    # A database that does not answer as a job starts (a restart takes 0.5–2 s) is waited for this long.
    CONNECT_PATIENCE_S = 15.0
    CONNECT_FIRST_PAUSE_S = 0.1
    _connection = None
    _connection_used_at = float("-inf")

    def perform_job(self, *args, **kwargs):
        with self.flask_app.app_context():
            connection = self._connection_within_patience(getattr(args[0], "id", "?"))
            session = db.session()
            # A job's session lives for one job; reloading every object after each commit only costs queries.
            session.expire_on_commit = False
            if connection is not None:
                session.info[PINNED] = connection
            succeeded = False
            try:
                succeeded = super().perform_job(*args, **kwargs)
                return succeeded
            finally:
                db.session.remove()
                if connection is not None and succeeded:
                    self._job_ended(connection)
                elif connection is not None:
                    # A job fails only when its bookkeeping did (handlers' errors are outcomes): after a COMMIT
                    # the database refused (a full disk), the connection kept a transaction SQLAlchemy no longer
                    # knew of, and the next job's claim was committed inside it, or failed on it. A new one is safe.
                    self._drop_connection()

    def _connection_within_patience(self, job_id: str):
        """Return the job's connection, waiting out a database that does not answer (a restart); None past that."""
        waited, pause = 0.0, self.CONNECT_FIRST_PAUSE_S
        while True:
            try:
                return self._job_connection()
            except SQLAlchemyError as unanswered:
                if waited >= self.CONNECT_PATIENCE_S:
                    # Raised here, outside RQ's handling of the job, it stopped the worker. Unpinned, the job fails
                    # in RQ's hands instead, its run still pending for the reconciler to queue again.
                    log.warning("no database connection for job %s after %.0f s: %s", job_id, waited, unanswered)
                    return None
                if not waited:
                    log.warning("the database does not answer; job %s waits for it: %s", job_id, unanswered)
            # Waiting, not failing at once: a worker ran its whole queue into RQ's failed jobs in a second.
            pause = min(pause, self.CONNECT_PATIENCE_S - waited)
            self.sleep(pause)
            waited, pause = waited + pause, min(pause * 2, 2.0)

    def _job_connection(self):
        """Return the worker's connection, pinged if it sat idle, or a new one if it is gone or was never opened."""
        # A checkout per job cost a pool check-out and check-in and, on PostgreSQL, pre-ping's round trip: one of
        # the four an attempt sent. Busy, the worker skips both; after an idle second it pings as the pool would.
        connection = self._connection
        if connection is not None and (connection.closed or connection.invalidated
                                       or connection.engine is not db.engine):
            self._drop_connection()
            connection = None
        if connection is None:
            connection = self._connection = db.engine.connect()
        elif self.clock() - self._connection_used_at >= self.PING_AFTER_IDLE_S and not _alive(connection):
            self._drop_connection()
            connection = self._connection = db.engine.connect()
        return connection

    def _job_ended(self, connection) -> None:
        # What a pool check-in did: nothing of this job's transaction or isolation level outlives it.
        try:
            if connection.in_transaction():
                connection.rollback()
            # Read from the options, not the database (get_isolation_level() asks it: a query on SQLite).
            default = connection.default_isolation_level
            if connection.get_execution_options().get("isolation_level", default) != default:
                connection.execution_options(isolation_level=default)
        except Exception:  # noqa: BLE001 - a broken connection is replaced before the next job
            self._drop_connection()
            return
        self._connection_used_at = self.clock()

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.invalidate()
                connection.close()
            except Exception:  # noqa: BLE001,S110 - it is being thrown away
                pass

    def teardown(self):
        self._drop_connection()
        super().teardown()


def _alive(connection) -> bool:
    """Ping the connection as the pool's pre-ping does; tell whether it answered."""
    try:
        return connection.dialect.do_ping(connection.connection.dbapi_connection)
    except Exception:  # noqa: BLE001 - any failure means the connection is gone
        return False


class StopNoteMixin:
    """Note, for a week, that this worker was asked to stop (Ctrl-C, a deploy's SIGTERM), so the reconciler runs its
    attempt again as the same one if it is killed at the end of its grace; RQ's own note lives with the worker's key,
    gone some minutes after a job began (a restart after a lunch break dead-lettered the run: helper 164)."""

    def request_stop(self, signum, frame):
        with contextlib.suppress(Exception):  # a note not written leaves the reconciler RQ's own
            self.connection.set(queueing.stop_note_key(self.name), "1", ex=queueing.STOP_NOTE_S)
        return super().request_stop(signum, frame)

    def register_birth(self, *args, **kwargs):
        with contextlib.suppress(Exception):  # a process of the same name from before (a pid used again)
            self.connection.delete(queueing.stop_note_key(self.name))
        return super().register_birth(*args, **kwargs)


class SparseHousekeepingMixin:
    """Do RQ's per-job housekeeping in Redis only when it says something: worker key, suspension, state, job beat."""

    EVERY_S = 1.0
    clock = staticmethod(time.monotonic)
    _last_beat = _last_suspension_check = float("-inf")

    def heartbeat(self, timeout=None, pipeline=None):
        # RQ beats before and after each dequeue and after each job, 3 round trips each: ~0.8 ms of a bare no-op
        # job's ~4 ms here. The key lives worker_ttl + 60 s, so a beat a second keeps it as alive as nine per job did.
        # Beats with a timeout or on a pipeline (RQ's job monitoring) always go through.
        if timeout is not None or pipeline is not None:
            return super().heartbeat(timeout, pipeline)
        beat_at = self.clock()
        if beat_at - self._last_beat < self.EVERY_S:
            return None
        self._last_beat = beat_at
        # One round trip for RQ's three writes, which also says again that this worker exists: a Redis restarted
        # without its data (or with an older snapshot) had forgotten it, and the Workers page said none ran.
        with self.connection.pipeline() as beat:
            beat.exists(self.key)
            super().heartbeat(None, beat)
            worker_registration.register(self, beat)
            existed = beat.execute()[0]
        if not existed:
            with self.connection.pipeline() as again:
                again.hset(self.key, mapping={**self.serialize(), "state": self._state or WorkerStatus.IDLE})
                again.expire(self.key, self.worker_ttl + 60)
                again.execute()
        if beat_at - self._last_scheduler_check >= self.SCHEDULER_CHECK_S:
            self._last_scheduler_check = beat_at
            self._keep_scheduler()
        return None

    # RQ's scheduler runs in a child of one worker, which dies with its Redis connection (a Redis restart): RQ starts
    # it again only at its maintenance, every 10 minutes, and delayed retries waited for the reconciler meanwhile.
    SCHEDULER_CHECK_S = 10.0
    _last_scheduler_check = float("-inf")
    _burst = False  # a burst worker moves the due jobs once at its start and keeps no scheduler running

    def work(self, burst: bool = False, **options):
        self._burst = burst
        return super().work(burst=burst, **options)

    def _keep_scheduler(self) -> None:
        """Take the scheduler's locks again if they are free or ours, starting its child if it is not running."""
        if self.scheduler is None or self._burst:
            return
        try:
            self.scheduler.acquire_locks(auto_start=True)  # RQ's own call at its maintenance; ours refreshes it
        except RedisError as error:  # the next check tries again
            log.warning("could not check RQ's scheduler: %s", error)

    def check_for_suspension(self, burst: bool):
        # `rq suspend` then takes effect within a second rather than before the very next job.
        checked_at = self.clock()
        if checked_at - self._last_suspension_check < self.EVERY_S:
            return
        self._last_suspension_check = checked_at
        super().check_for_suspension(burst)

    _state_written = None

    def set_state(self, state: str, pipeline=None):
        # RQ writes "idle" after each job and again before the next dequeue: one HSET round trip of the two says
        # nothing new. Only this method and a job's success (below) write the state (or the whole hash, from the
        # state it last set), so a skipped write leaves Redis as it was: already this state.
        if pipeline is None and state == self._state_written:
            self._state = state  # Redis has it already (a job's success wrote "idle")
            return
        self._state_written = state
        super().set_state(state, pipeline)

    def handle_execution_ended(self, job, queue, heartbeat_ttl):
        # RQ stamps the job's last_heartbeat once more when it returns, a round trip of its own, so that a long
        # success or failure callback looks alive; a job with none goes straight on to its final transaction.
        if job.success_callback is None and job.failure_callback is None:
            job.ended_at = now()
            return
        super().handle_execution_ended(job, queue, heartbeat_ttl)

    # An idle worker wakes this often to beat. A job's preparation cuts the key's life to ~90 s (RQ's job
    # monitoring), which the beat skipped just before an idle wait cannot restore; and a Redis restarted without its
    # data knows the worker again only from its next beat (the client's retry sends the wait again on a new
    # connection, so it ends on time, not at the restart): every 60 s, the Workers page said none ran for a minute.
    IDLE_WAKE_S = 15

    @property
    def dequeue_timeout(self) -> int:
        return min(super().dequeue_timeout, self.IDLE_WAKE_S)


class FewerRoundTripsMixin:
    """Do RQ's bookkeeping around a job in two Redis round trips where RQ takes six: one to start it, one to end it."""

    # Rebound uses RQ as transport: a run's truth is in the database, its queues carry only Rebound's own jobs, and
    # none has RQ dependents or repeats (workflows and retries live in the database). What RQ reads or writes per
    # job for those features, or in separate round trips, is done here in the pipelines it already sends.
    _prepared_job_id = None

    def prepare_execution(self, job):
        # RQ prepares a job in two pipelines: its execution and the worker's "busy" here, then (prepare_job_execution)
        # the job's status and beats. One pipeline carries both; what is written, and in what order, is RQ's.
        with self.connection.pipeline() as pipeline:
            heartbeat_ttl = self.get_heartbeat_ttl(job)
            execution = Execution.create(job, heartbeat_ttl, pipeline=pipeline, worker_name=self.name)
            self.executions[execution.id] = execution
            self.set_state(WorkerStatus.BUSY, pipeline=pipeline)
            self.heartbeat(heartbeat_ttl, pipeline=pipeline)
            job.heartbeat(now(), heartbeat_ttl, pipeline=pipeline)
            job.prepare_for_execution(self.name, pipeline=pipeline)
            pipeline.persist(job.key)
            if len(self.queues) == 1:  # as perform_job asks of prepare_job_execution
                pipeline.lrem(Queue(job.origin, connection=self.connection).intermediate_queue_key, 1, job.id)
            pipeline.execute()
        self._prepared_job_id = job.id
        return execution

    def prepare_job_execution(self, job, remove_from_intermediate_queue: bool = False):
        if self._prepared_job_id == job.id:
            self._prepared_job_id = None  # prepared with its execution, above
            return
        super().prepare_job_execution(job, remove_from_intermediate_queue)

    def handle_job_success(self, job, queue, started_job_registry, execution):
        # RQ first WATCHes the job's dependents set and reads it (two round trips) to move dependents to ready, and
        # marks the worker idle after it in a third. With no dependents possible, success is RQ's one MULTI/EXEC,
        # with the worker's "idle" in it (set_state then skips RQ's own write of it).
        if job.repeats_left:
            return super().handle_job_success(job, queue, started_job_registry, execution)
        with self.connection.pipeline() as pipeline:
            self.increment_successful_job_count(pipeline=pipeline)
            self.increment_total_working_time(job.ended_at - job.started_at, pipeline)
            result_ttl = job.get_result_ttl(self.default_result_ttl)
            if result_ttl != 0:
                job._handle_success(result_ttl, pipeline=pipeline, worker_name=self.name, execution_id=execution.id,
                                    execution_started_at=execution.created_at, execution_ended_at=job.ended_at)
            job.cleanup(result_ttl, pipeline=pipeline, remove_from_queue=False)
            job._status = JobStatus.FINISHED
            self.cleanup_execution(job, pipeline=pipeline, execution=execution)
            # "idle" goes in this transaction, but the worker reads busy until the job is over (execute_job's
            # set_state): RQ's SIGTERM handler raises StopRequested at once in an idle worker, and raised in here,
            # inside perform_job, RQ took it for the job's error and the stop was lost (the worker went back to
            # waiting for work till it was killed).
            pipeline.hset(self.key, "state", WorkerStatus.IDLE)
            pipeline.execute()
        self._state_written = WorkerStatus.IDLE
        release_slot(job)


class BusyBeatMixin:
    """Beat while a job that is no run's attempt works (a bulk replay's slice, a runbook): a run's own heartbeat
    proves its worker alive, but nothing did for these, so the Workers page could not tell a long one from a worker
    killed in it, and showed a dead worker busy for minutes (helper 170)."""

    BUSY_BEAT_S = 5.0

    def execute_job(self, job, queue):
        if queueing.parse_job_id(job.id) is not None:
            return super().execute_job(job, queue)
        done = threading.Event()
        beat = threading.Thread(target=self._beat_until, args=(done,), name="busy-beat", daemon=True)
        beat.start()
        try:
            return super().execute_job(job, queue)
        finally:
            done.set()
            beat.join(timeout=self.BUSY_BEAT_S)

    def _beat_until(self, done: threading.Event) -> None:
        while not done.wait(self.BUSY_BEAT_S):
            # Under the lock a handler's fork takes first (engine/isolation.py): no beat is half-sent in a child.
            with heartbeat.BEATING, contextlib.suppress(RedisError):
                self.heartbeat(self.worker_ttl + 60)


class ReboundSimpleWorker(StopNoteMixin, AppContextMixin, BusyBeatMixin, FewerRoundTripsMixin, SparseHousekeepingMixin,
                          SimpleWorker):
    """Runs jobs in the worker process itself: no fork per job, so several times faster."""


class ReboundForkWorker(StopNoteMixin, AppContextMixin, BusyBeatMixin, FewerRoundTripsMixin, SparseHousekeepingMixin,
                        SimpleWorker):
    """Forks a child per handler call: a crashing, leaking or hung handler cannot take the worker down.

    Unlike RQ's forking Worker, which forks for the whole job, only the handler runs in the child: the claim
    and the outcome are written by the worker on its warm connection (see engine/isolation.py).
    """


WORKER_CLASSES = {"simple": ReboundSimpleWorker, "fork": ReboundForkWorker}


def build_worker(app, connection, kind: str = "simple", queues: list[str] | None = None) -> Worker:
    """Create a worker of the given kind bound to the app."""
    # Import the job and handler modules once here, not in every forked child.
    importlib.import_module("jobs.execute")
    registry.names()
    cls = WORKER_CLASSES[kind]
    app.config["ISOLATE_HANDLERS"] = kind == "fork"
    worker = cls(queues or QUEUES, connection=connection, name=this_worker())
    worker.flask_app = app
    return worker
