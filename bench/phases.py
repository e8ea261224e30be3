"""Where a worker's CPU goes per job: each phase of RQ's loop and Rebound's attempt timed by the thread's CPU clock.

Used by `bench.worker_cpu --phases`: wraps the methods and functions below in the worker process, so each call
adds its CPU time (`time.thread_time`, this thread only: not the heartbeat or metrics threads) to its phase.
Phases nest (the attempt runs inside RQ's perform_job): each is printed with its parent's name.
"""

import functools
import time
from collections import defaultdict

SPENT: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)


def _timed(label: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[label] += time.thread_time() - started
            CALLS[label] += 1
    return wrapper


def _wrap(owner, name: str, label: str) -> None:
    setattr(owner, name, _timed(label, getattr(owner, name)))


def install(rebound: bool) -> None:
    """Wrap the phases of the work loop (and, for a Rebound worker, of its attempt)."""
    from rq import job, queue
    from rq.worker import base

    worker = base.BaseWorker
    for name, label in (("dequeue_job_and_maintain_ttl", "rq.dequeue (LPOP, job HGETALL, unpickle)"),
                        ("prepare_execution", "rq.prepare_execution (execution hash, started registry)"),
                        ("prepare_job_execution", "rq.perform_job > prepare_job_execution (status, heartbeats)"),
                        ("handle_execution_ended", "rq.perform_job > handle_execution_ended (job heartbeat)"),
                        ("handle_job_success", "rq.perform_job > handle_job_success (result, registries, counts)"),
                        ("set_state", "rq.set_state (worker hash)"),
                        ("heartbeat", "rq.heartbeat (worker key)"),
                        ("check_for_suspension", "rq.check_for_suspension"),
                        ("execute_job", "rq.execute_job (all of a job but the dequeue)"),
                        ("perform_job", "rq.perform_job")):
        _wrap(worker, name, label)
    _wrap(job.Job, "perform", "rq.perform_job > job.perform (the job function)")
    # Round trips, counted by what sends them: a Redis command or pipeline, a SQL statement, a pool's ping.
    import redis.connection
    from sqlalchemy import event
    from sqlalchemy.dialects.postgresql import _psycopg_common
    from sqlalchemy.engine import Engine, default

    _wrap(redis.connection.AbstractConnection, "send_packed_command", "~ Redis round trips (commands, pipelines)")
    _wrap(default.DefaultDialect, "do_ping", "~ pings (SQLite)")
    _wrap(_psycopg_common._PGDialect_common_psycopg, "do_ping", "~ pings (PostgreSQL: a round trip)")

    @event.listens_for(Engine, "before_cursor_execute")
    def _statement(*_):
        CALLS["~ SQL statements (BEGIN and COMMIT not counted)"] += 1

    @event.listens_for(Engine, "commit")
    def _commit(*_):
        CALLS["~ commits (on PostgreSQL in autocommit they send nothing)"] += 1
    _wrap(queue.Queue, "dequeue_any", "rq.dequeue > dequeue_any")
    if not rebound:
        return
    from console.processes import worker as rebound_worker
    from console.services.engine import admission, breakers, claim, execute, transitions
    from console.services.engine.heartbeat import Heartbeat

    _wrap(rebound_worker.AppContextMixin, "perform_job", "rebound.perform_job (app context, session, RQ's perform)")
    _wrap(claim, "claim", "rebound.execute > claim")
    _wrap(execute, "_perform", "rebound.execute > perform (context, handler, record, breaker)")
    _wrap(admission, "read", "rebound.claim > admission.read")
    _wrap(breakers, "allow", "rebound.claim > breakers.allow (GET)")
    _wrap(breakers, "record", "rebound.perform > breakers.record")
    _wrap(transitions, "move", "rebound.move (claim and success)")
    _wrap(transitions, "_move_row", "rebound.move > UPDATE + INSERT")
    _wrap(execute, "context_for", "rebound.perform > context_for")
    _wrap(execute, "call_handler", "rebound.perform > the handler's call (alarm)")
    _wrap(execute, "_record", "rebound.perform > record (move, commit)")
    _wrap(Heartbeat, "__enter__", "rebound.perform > heartbeat enter")
    _wrap(Heartbeat, "__exit__", "rebound.perform > heartbeat exit")
    from sqlalchemy.orm import scoping
    _wrap(scoping.scoped_session, "commit", "rebound.commit")
    from console import metrics
    _wrap(metrics, "transition", "rebound.move > metrics.transition")


def report(jobs: int) -> list[str]:
    """Return one line per phase: µs of CPU per job and calls per job."""
    return [f"{SPENT[label] / jobs * 1e6:8.0f} µs/job {CALLS[label] / jobs:5.2f} calls/job  {label}"
            for label in sorted(CALLS)]
