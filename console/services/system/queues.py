"""What RQ holds right now: queue depths, delayed jobs, workers, and which scheduler leads."""

from dataclasses import dataclass, field
from datetime import UTC, datetime

import redis
from rq import Queue, Worker
from rq.job import Job
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry
from rq.scheduler import SCHEDULER_KEY_TEMPLATE, SCHEDULER_LOCKING_KEY_TEMPLATE
from sqlalchemy import select

from console.domain.statuses import ACTIVE_VALUES, IN_WORK
from console.extensions import db
from console.models import Run
from console.redis_conn import get_redis
from console.services.engine import queueing
from console.services.engine.queueing import QUEUES
from console.services.settings import setting
from console.services.system import leader
from console.services.system.maintenance import MAINTENANCE, Periodic

# A delayed job this late was not moved by RQ's scheduler: no worker runs one for its queue.
OVERDUE_AFTER_S = 30
# An idle worker wakes to beat every 15 s (processes/worker.py, IDLE_WAKE_S): four missed beats is a dead one.
IDLE_SILENT_S = 60


@dataclass(frozen=True)
class QueueStats:
    name: str
    depth: int
    scheduled: int
    next_due: datetime | None
    overdue: int
    started: int
    failed: int
    oldest_enqueued_at: datetime | None
    scheduler: str | None  # where the RQ scheduler that moves this queue's delayed jobs runs ("host · pid N")


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    hostname: str | None
    pid: int | None
    state: str
    queues: list[str]
    job_id: str | None
    run: tuple[int, int, int] | None  # (run_id, series, attempt) behind job_id, if this viewer may see that run
    last_heartbeat: datetime | None  # RQ's beat, or the run's it works on if fresher (RQ beats between jobs only)
    beating_run: int | None  # the run whose fresher heartbeat last_heartbeat is, if this viewer may see it
    birth: datetime | None
    successful: int
    failed: int
    working_s: float


@dataclass(frozen=True)
class Leader:
    host: str
    pid: str
    lock_id: str
    expires_in_s: float | None


@dataclass(frozen=True)
class QueueBoard:
    queues: list[QueueStats] = field(default_factory=list)
    workers: list[WorkerInfo] = field(default_factory=list)
    leader: Leader | None = None
    maintenance: list[Periodic] = field(default_factory=lambda: list(MAINTENANCE))
    error: str | None = None


def board(now: datetime, scope: int | None = None) -> QueueBoard:
    """Read every queue, worker and the scheduler leader from Redis; on an outage, say why instead."""
    try:
        connection = get_redis()
        queues = [_queue_stats(Queue(name, connection=connection), now) for name in _queue_names(connection)]
        workers = _workers(connection, scope, now)
        return QueueBoard(queues, workers, _leader(connection))
    except (redis.RedisError, OSError) as error:
        return QueueBoard(error=f"{type(error).__name__}: {error}")


def _queue_names(connection) -> list[str]:
    # The queues workers serve come first, in their order; any other queue RQ knows follows.
    others = sorted(queue.name for queue in Queue.all(connection=connection) if queue.name not in QUEUES)
    return [*QUEUES, *others]


def _queue_stats(queue: Queue, now: datetime) -> QueueStats:
    connection = queue.connection
    scheduled = ScheduledJobRegistry(queue=queue)
    # No cleanup: reading the page must not move jobs between registries.
    first_due = connection.zrange(scheduled.key, 0, 0, withscores=True)
    overdue = connection.zcount(scheduled.key, 0, now.timestamp() - OVERDUE_AFTER_S)
    oldest = queue.get_job_ids(0, 1)
    oldest_job = Job.fetch_many(oldest, connection=connection)[0] if oldest else None
    holder = connection.get(SCHEDULER_LOCKING_KEY_TEMPLATE % queue.name)
    return QueueStats(
        name=queue.name,
        depth=queue.count,
        scheduled=scheduled.get_job_count(cleanup=False),
        next_due=datetime.fromtimestamp(first_due[0][1], UTC) if first_due else None,
        overdue=overdue,
        started=_running(StartedJobRegistry(queue=queue), now),
        failed=FailedJobRegistry(queue=queue).get_job_count(cleanup=False),
        oldest_enqueued_at=_aware(oldest_job.enqueued_at) if oldest_job else None,
        scheduler=_scheduler_of(connection, holder.decode()) if holder else None,
    )


def _running(registry: StartedJobRegistry, now: datetime) -> int:
    """Count the jobs RQ says run on a queue, less those it gave back from a snapshot after they ended: past their
    expiry (until RQ's cleanup), or taken long ago for a run that has ended since (helper 162)."""
    taken = set(registry.get_job_ids(cleanup=False)) - set(registry.get_expired_job_ids(now.timestamp()))
    runs = {job_id: parsed[0] for job_id in taken if (parsed := queueing.parse_job_id(job_id))}
    return len(taken - _ended(set(runs.values()), set(runs), now))


def _scheduler_of(connection, name: str) -> str:
    """Say where the RQ scheduler holding a queue's lock runs; its bare name is a random id."""
    meta = {key.decode(): value.decode() for key, value in connection.hgetall(SCHEDULER_KEY_TEMPLATE % name).items()}
    if meta.get("hostname"):
        return f"{meta['hostname']} · pid {meta.get('pid', '?')}"
    # Its record lost (a Redis restarted without its data) until it starts again: its random id says nothing.
    return f"an RQ scheduler in a worker (host not recorded; id {name[:8]})"


class _Observed(Worker):
    """A worker as read from Redis for this page, leaving the console's client as it is."""

    def _set_connection(self, connection):
        # RQ's constructor raises the socket timeout of the client it is given to a worker's (415 s, for BLPOP):
        # given the console's, a frozen Redis then held every submit and /healthz for the whole outage, not 3 s.
        return connection


def _workers(connection, scope: int | None, now: datetime) -> list[WorkerInfo]:
    workers = sorted(_Observed.all(connection=connection), key=lambda worker: worker.name)
    jobs = {worker.name: worker.get_current_job_id() for worker in workers}
    runs = {job_id: parsed for job_id in jobs.values() if job_id and (parsed := queueing.parse_job_id(job_id))}
    visible = {run_id for run_id, _, _ in runs.values()}
    beats = _run_beats(visible)
    if scope is not None and visible:
        visible = set(db.session.execute(select(Run.id).where(Run.id.in_(visible), Run.tenant_id == scope))
                      .scalars())
    ended = _ended(visible, {job_id for job_id, parsed in runs.items() if parsed[0] in visible}, now)
    infos = []
    for worker in workers:
        run = runs.get(jobs[worker.name])
        own_beat, run_beat = _aware(worker.last_heartbeat), beats.get(run) if run else None
        through_run = run_beat is not None and (own_beat is None or run_beat > own_beat)
        state = worker.get_state()
        if run is not None and jobs[worker.name] in ended and not _silent(own_beat, now):
            # A Redis restarted from its last snapshot gave back a job the worker had finished since: it read "busy,
            # run 4066" for ten minutes after that run had ended (helper 162). The worker is alive and the run over.
            state, run, jobs[worker.name] = "idle", None, None
        if state == "busy" and run is not None and _silent(run_beat if through_run else own_beat, now):
            # Killed mid-run: RQ keeps its key "busy" for minutes, while the run's heartbeat (written by a thread of
            # the worker running it) stopped, or the run moved on to an attempt elsewhere. Its latest beat, the run's
            # or its own, is what is silent (it read "busy" while the run page said the run was taken for lost).
            state = "lost"
        elif state == "busy" and run is None and jobs[worker.name] and _silent(own_beat, now):
            # Killed in a job that is no run's (a bulk replay's slice, a runbook), which beats every 5 s while it
            # works (processes/worker.py): it read "busy" for eleven minutes after its worker died (helper 170).
            state = "lost"
        elif state == "idle" and (own_beat is None or (now - own_beat).total_seconds() > IDLE_SILENT_S):
            # Killed while idle: RQ keeps its key "idle" for 8 minutes, and the page said so of a dead worker.
            state = "lost"
        infos.append(WorkerInfo(
            name=worker.name, hostname=worker.hostname, pid=worker.pid, state=state,
            queues=worker.queue_names(), job_id=jobs[worker.name], run=_visible(run, visible),
            last_heartbeat=run_beat if through_run else own_beat,
            beating_run=run[0] if through_run and run[0] in visible else None,
            birth=_aware(worker.birth_date), successful=worker.successful_job_count,
            failed=worker.failed_job_count, working_s=worker.total_working_time,
        ))
    return infos


def _ended(run_ids: set[int], job_ids: set[str], now: datetime) -> set[str]:
    """Return those of these jobs taken long ago (longer than an attempt may stay silent) whose run has ended since:
    a job just taken may name a run that ended (a duplicate delivery, skipped at its claim)."""
    if not run_ids:
        return set()
    over = set(db.session.execute(select(Run.id).where(Run.id.in_(run_ids), Run.status.not_in(ACTIVE_VALUES)))
               .scalars())
    taken = {job.id: _aware(job.started_at) for job in Job.fetch_many(
        [job_id for job_id in job_ids if queueing.parse_job_id(job_id)[0] in over], connection=get_redis()) if job}
    return {job_id for job_id, started in taken.items() if started is not None and _silent(started, now)}


def _silent(beat: datetime | None, now: datetime) -> bool:
    """Tell whether a busy worker has not beaten for longer than a running attempt may stay silent."""
    return beat is None or (now - beat).total_seconds() > setting("STALE_AFTER_S")


def _run_beats(run_ids: set[int]) -> dict[tuple[int, int, int], datetime]:
    """Return the heartbeat of each of these runs still in work, by (run, series, attempt): the thread that writes
    it lives in the worker running that attempt. A worker that died on an earlier attempt of the run (its RQ key
    outlives it for a while) is not that worker, and must not look alive through it."""
    if not run_ids:
        return {}
    rows = db.session.execute(select(Run.id, Run.series, Run.attempt, Run.heartbeat_at).where(
        Run.id.in_(run_ids), Run.status.in_(IN_WORK), Run.heartbeat_at.is_not(None)))
    # A job is named by the attempt before it (queueing.job_id): running it, the run is at the next one.
    return {(run_id, series, attempt - 1): _aware(beat) for run_id, series, attempt, beat in rows}


def _visible(run: tuple[int, int, int] | None, visible: set[int]) -> tuple[int, int, int] | None:
    return run if run is not None and run[0] in visible else None


def _leader(connection) -> Leader | None:
    raw = connection.get(leader.KEY)
    if raw is None:
        return None
    # "host:pid:id"; split from the right, so a host name holding ':' stays whole.
    host, pid, lock_id = ([""] * 3 + raw.decode().rsplit(":", 2))[-3:]
    ttl_ms = connection.pttl(leader.KEY)
    return Leader(host, pid, lock_id, ttl_ms / 1000 if ttl_ms and ttl_ms > 0 else None)


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
