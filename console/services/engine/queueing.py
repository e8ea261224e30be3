"""Put attempts on RQ queues: now, or at a time (RQ's scheduler moves them when due)."""

from datetime import UTC, datetime, timedelta

from rq import Queue, Worker
from rq.job import Job
from rq.registry import StartedJobRegistry

from console.redis_conn import get_redis
from console.services.engine import bulk_enqueue

RUN_QUEUE = "default"
RETRY_QUEUE = "retries"
MAINTENANCE_QUEUE = "maintenance"
# What a worker listens to; they take turns (round robin, commands/processes.py), so none waits behind another.
QUEUES = [RUN_QUEUE, RETRY_QUEUE, MAINTENANCE_QUEUE]
ENTRY_POINT = "jobs.execute.run_attempt"
# Workers record results in the database; RQ needs to keep none.
JOB_OPTIONS = {"result_ttl": 60, "failure_ttl": 24 * 3600}


def job_id(run_id: int, series: int, attempt: int, deferred_to: datetime | None = None) -> str:
    """Name the job for one attempt, so enqueueing it twice cannot make two different jobs.

    A deferral (window, capacity, open breaker: no attempt spent) is queued by the attempt's own job while
    it runs, and RQ marks that job finished when it returns; so a deferral's job is named by its due time too.
    """
    name = f"run-{run_id}-s{series}-a{attempt}"
    return name if deferred_to is None else f"{name}-d{int(_whole_second(deferred_to).timestamp())}"


def parse_job_id(value: str) -> tuple[int, int, int] | None:
    """Return (run_id, series, attempt) from a job id made by job_id, else None."""
    try:
        run, series, attempt, *deferral = value.removeprefix("run-").split("-")
        if len(deferral) > 1 or (deferral and not deferral[0].startswith("d")):
            return None
        return int(run), int(series.removeprefix("s")), int(attempt.removeprefix("a"))
    except ValueError:
        return None


def _whole_second(when: datetime) -> datetime:
    # RQ's scheduler keeps whole seconds and drops the fraction; round up so a retry never starts early.
    return when.replace(microsecond=0) + timedelta(seconds=1) if when.microsecond else when


def _timeout(timeout_s: int) -> int:
    # The handler has its own timeout; RQ's is the backstop for the bookkeeping around it.
    return int(timeout_s) + 60


def enqueue_now(run_id: int, series: int, attempt: int, timeout_s: int, queue: str = RUN_QUEUE) -> None:
    """Queue an attempt to start as soon as a worker is free."""
    enqueue_many_now([(run_id, series, attempt, timeout_s)], queue)


def enqueue_first_attempts(runs: list[tuple[int, int]]) -> None:
    """Queue the first attempt of many new runs; takes (run_id, timeout_s) pairs."""
    enqueue_many_now([(run_id, 1, 0, timeout_s) for run_id, timeout_s in runs])


def enqueue_many_now(attempts: list[tuple[int, int, int, int]], queue: str = RUN_QUEUE, *, client=None) -> None:
    """Queue attempts to start now, in one round trip; takes (run_id, series, attempt, timeout_s).

    `client` is the Redis client to use where there is no app context (a thread of the caller's).
    """
    by_timeout: dict[int, list] = {}
    for run_id, series, attempt, timeout_s in attempts:
        by_timeout.setdefault(_timeout(timeout_s), []).append((job_id(run_id, series, attempt), (run_id, attempt)))
    bulk_enqueue.enqueue_groups(client or get_redis(), queue, ENTRY_POINT, [
        (calls, {"timeout": timeout, **JOB_OPTIONS}) for timeout, calls in by_timeout.items()])


def enqueue_at(when: datetime, run_id: int, series: int, attempt: int, timeout_s: int, *,
               deferral: bool = False) -> None:
    """Queue an attempt to start at `when` (a delayed retry, or a deferral), never earlier."""
    Queue(RETRY_QUEUE, connection=get_redis()).enqueue_at(
        _whole_second(when), ENTRY_POINT, run_id, attempt,
        job_id=job_id(run_id, series, attempt, when if deferral else None), job_timeout=_timeout(timeout_s),
        **JOB_OPTIONS)


def job_status(run_id: int, series: int, attempt: int, deferred_to: datetime | None = None) -> str | None:
    """Return the status RQ holds for this attempt's job ("queued", "scheduled", ...), or None if it has none."""
    return status_of(job_id(run_id, series, attempt, deferred_to))


def job_state(run_id: int, series: int, attempt: int, deferred_to: datetime | None = None
              ) -> tuple[str | None, datetime | None]:
    """Return the status RQ holds for this attempt's job and when a worker took it (None, None if it has none)."""
    return state_of(job_id(run_id, series, attempt, deferred_to))


def state_of(name: str) -> tuple[str | None, datetime | None]:
    """Return the status RQ holds for the job of this id and when a worker took it (None, None if it has none)."""
    job = Job.fetch_many([name], connection=get_redis())[0]
    if job is None:
        return None, None
    status = job.get_status(refresh=False)
    started = job.started_at
    return (status.value if hasattr(status, "value") else status), (
        started.replace(tzinfo=UTC) if started is not None and started.tzinfo is None else started)


STOP_NOTE_S = 7 * 24 * 3600  # how long a worker's "asked to stop" is remembered: a week's outage


def stop_note_key(worker_name: str) -> str:
    """Name the note a worker leaves when asked to stop (processes/worker.py's StopNoteMixin)."""
    return f"rebound:worker-stopped:{worker_name}"


def asked_to_stop(worker_names: set[str]) -> set[str]:
    """Return those of these workers that were asked to stop (a restart, a deploy): each notes it for a week; one
    from before that note is known by RQ's own, on the worker's key while it lives."""
    connection = get_redis()
    names = sorted(worker_names)
    noted = {name for name, there in zip(names, connection.mget([stop_note_key(name) for name in names]) if names
                                         else [], strict=True) if there}
    for name in set(names) - noted:
        worker = Worker.find_by_key(Worker.redis_worker_namespace_prefix + name, connection=connection)
        if worker is not None and worker.shutdown_requested_date is not None:
            noted.add(name)
    return noted


def release_abandoned(run_id: int, series: int, attempt: int, deferred_to: datetime | None = None) -> None:
    """Take a job a dead worker held out of RQ's started registry, before it is queued again under its id."""
    release(job_id(run_id, series, attempt, deferred_to))


def release(name: str) -> None:
    """Take the job of this id, which a dead worker held, out of RQ's started registry."""
    # Left there, RQ's own cleanup would later take the job's next execution, running by then, for the abandoned one.
    job = Job.fetch_many([name], connection=get_redis())[0]
    if job is not None:
        StartedJobRegistry(job.origin, connection=get_redis()).remove_executions(job)


def status_of(name: str) -> str | None:
    """Return the status RQ holds for the job of this id, or None if it has none."""
    job = Job.fetch_many([name], connection=get_redis())[0]
    if job is None:
        return None
    status = job.get_status(refresh=False)
    return status.value if hasattr(status, "value") else status
