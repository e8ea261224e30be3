"""Nothing lost, nothing twice: a worker killed mid-run, and Redis losing every job."""

import signal
from datetime import timedelta

import redis
from sqlalchemy import func, select

from console.extensions import db
from console.models.reports import ALL_TASKS, report_hours
from console.services.engine import queueing
from console.services.engine.execute import execute
from console.services.engine.reconcile import reconcile
from console.services.reports import rollup
from tests.helpers import living_children, process_alive, wait_for

QUICK = {"base_delay_s": 1, "multiplier": 1, "jitter": 0, "max_attempts": 3}


def reconcile_until(runs, run_ids, status="succeeded", timeout_s=40):
    """Run the reconciler (as the scheduler does every 30 s) until every run reaches `status`."""

    def settled():
        reconcile()
        return all(runs.status(run_id) == status for run_id in run_ids)

    wait_for(settled, timeout_s, 0.5, f"runs {run_ids} to become {status}")


def test_worker_killed_mid_run_is_retried_and_finishes_once(app, runs, workers, monkeypatch):
    # Staleness judged at 5 s here, not the tests' 2: the second worker's live attempt must not look lost too.
    monkeypatch.setitem(app.config, "STALE_AFTER_S", 5)
    doomed = workers()
    run_id = runs.submit("demo.sleep", {"seconds": 2}, policy=QUICK)
    runs.wait(run_id, "running")
    doomed.kill()  # SIGKILL: no cleanup, no goodbye
    doomed.wait()
    workers()
    reconcile_until(runs, [run_id])
    run = runs.get(run_id)
    assert run.attempt == 2 and run.executions == 2
    [lost] = runs.events(run_id, "retry_wait")
    assert lost.error_code == "worker_lost" and lost.attempt == 1
    assert len(runs.events(run_id, "succeeded")) == 1


def test_an_attempt_its_worker_was_stopped_during_runs_again_without_spending_an_attempt(app, runs, workers,
                                                                                        monkeypatch):
    """A restart (Ctrl-C, a deploy) asks the workers to stop and kills one still busy after its grace: its attempt was
    counted a failure, and a run allowed one attempt was dead-lettered by the restart (helper 162)."""
    monkeypatch.setitem(app.config, "STALE_AFTER_S", 5)
    stopped = workers()
    run_id = runs.submit("demo.sleep", {"seconds": 3}, policy={**QUICK, "max_attempts": 1})
    runs.wait(run_id, "running")
    stopped.send_signal(signal.SIGTERM)  # asked to stop: it waits for its run
    wait_for(lambda: queueing.asked_to_stop({runs.get(run_id).worker_id}), 15, 0.05, "the stop to be noted")
    stopped.kill()  # and killed at the end of its grace
    stopped.wait()
    # RQ's own note lives on the worker's key, gone minutes after the job began: `up` down over lunch lost it, and
    # the run was dead-lettered as worker_lost (helper 164). The worker's own note outlives it.
    from rq import Worker

    from console.redis_conn import get_redis
    get_redis().delete(Worker.redis_worker_namespace_prefix + runs.get(run_id).worker_id)
    workers()
    reconcile_until(runs, [run_id])
    run = runs.get(run_id)
    assert (run.attempt, run.executions) == (1, 2)
    [interrupted] = runs.events(run_id, "retry_wait")
    assert (interrupted.reason, interrupted.attempt) == ("interrupted", 0)  # back before attempt 1, which it starts
    assert "was stopped (a restart or a deploy) during attempt 1" in interrupted.message
    assert runs.dead_letters(run_id) == []
    # Nor is it a failed attempt in the reports.
    hour = interrupted.at.replace(minute=0, second=0, microsecond=0)
    rollup.recompute(hour, hour + timedelta(hours=2))  # its success may fall in the next hour
    counted = db.session.execute(select(func.sum(report_hours.c.attempts_failed), func.sum(report_hours.c.succeeded))
                                 .where(report_hours.c.hour >= hour, report_hours.c.task_id == ALL_TASKS)).one()
    assert tuple(counted) == (0, 1)


def test_a_killed_workers_scheduler_and_handler_children_end_with_it(runs, workers):
    doomed = workers("fork")
    run_id = runs.submit("demo.sleep", {"seconds": 60}, policy=QUICK)
    runs.wait(run_id, "running")
    # RQ's scheduler (the only worker holds its locks) and the child running the handler.
    children = wait_for(lambda: len(living_children(doomed.pid)) == 2 and living_children(doomed.pid), 15, 0.05,
                        "the worker's scheduler and handler children")
    doomed.kill()
    doomed.wait()
    # Generous: they end on SIGTERM within a second alone, but once took over 10 s with the suite's load beside them.
    wait_for(lambda: not any(process_alive(pid) for pid in children), 30, 0.05,
             f"the killed worker's children {sorted(children)} to end")


def test_a_killed_workers_command_ends_with_it(app, runs, workers, tmp_path):
    pid_file = tmp_path / "command.pid"
    commands = tmp_path / "commands.yaml"
    commands.write_text(f"slow:\n  argv: [python3, -c, 'import os, time; open(\"{pid_file}\", \"w\").write(str("
                        "os.getpid())); time.sleep(60)']\n")
    app.config["COMMANDS_FILE"] = str(commands)
    doomed = workers(REBOUND_COMMANDS_FILE=str(commands))
    run_id = runs.submit("command:slow", policy=QUICK)
    command = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 30, 0.05, "the command to start"))
    doomed.kill()
    doomed.wait()
    # A command left running would go on beside the attempt the reconciler starts for the lost one: twice at once.
    wait_for(lambda: not process_alive(command), 30, 0.05, f"the killed worker's command {command} to end")
    assert runs.status(run_id) == "running"


def test_redis_flush_loses_no_run_and_runs_none_twice(runs, workers, redis_url, clock):
    waiting = [runs.submit("demo.noop") for _ in range(5)]
    retrying = runs.submit("demo.flaky", {"fail_times": 1}, policy=QUICK)
    assert execute(retrying, 0) == "retry_wait"  # its delayed retry now lives only in Redis
    redis.Redis.from_url(redis_url).flushdb()
    workers()
    reconcile_until(runs, waiting + [retrying])
    for run_id in waiting:
        assert len(runs.events(run_id, "running")) == 1
    assert runs.get(retrying).attempt == 2


def test_reconcile_drops_queued_jobs_of_finished_runs(runs, clock):
    run_id = runs.submit("demo.noop")
    assert execute(run_id, 0, clock=clock) == "succeeded"
    queueing.enqueue_now(run_id, 1, 0, 10)  # a stray duplicate left in the queue
    report = reconcile()
    assert report.dropped_jobs == [f"run-{run_id}-s1-a0"]


def test_a_failed_job_whose_record_rq_lost_in_part_is_dropped_and_the_pass_goes_on(runs, clock, monkeypatch):
    """A worker killed mid-job: RQ's delete raised "Execution … not found in Redis", and the whole pass stopped before
    its compensations (helper 162)."""
    from rq import Queue
    from rq.job import Job
    from rq.registry import FailedJobRegistry

    from console.redis_conn import get_redis

    run_id = runs.submit("demo.noop")
    queue = Queue(queueing.RUN_QUEUE, connection=get_redis())
    job = Job.fetch(f"run-{run_id}-s1-a0", connection=get_redis())
    queue.remove(job)
    queue.failed_job_registry.add(job, exc_string="killed")
    assert execute(run_id, 0, clock=clock) == "succeeded"
    real_remove = FailedJobRegistry.remove

    def lost_execution(registry, job_id, pipeline=None, delete_job=False):
        if delete_job:
            raise ValueError(f"Execution {job_id}-x not found in Redis")
        return real_remove(registry, job_id, pipeline)

    monkeypatch.setattr(FailedJobRegistry, "remove", lost_execution)
    compensations = []
    monkeypatch.setattr("console.services.engine.reconcile._requeue_compensations",
                        lambda *args, **kwargs: compensations.append(1))
    report = reconcile()
    assert report.dropped_jobs == [f"run-{run_id}-s1-a0"] and compensations == [1]
    assert queue.failed_job_registry.get_job_ids() == []


def test_a_delayed_retry_of_a_run_that_ended_since_is_dropped(runs, clock):
    """Pulled forward (Retry now, a bulk retry) or cancelled, a run left its delayed retry scheduled: Queues counted it
    "delayed, in 10 min" after the run had ended (helper 160)."""
    from rq import Queue

    from console.redis_conn import get_redis
    from console.services.actor import Actor
    from console.services.engine import control

    run_id = runs.submit("demo.flaky", {"fail_times": 1}, policy={**QUICK, "base_delay_s": 600, "max_delay_s": 600})
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    scheduled = Queue(queueing.RETRY_QUEUE, connection=get_redis()).scheduled_job_registry
    [delayed] = scheduled.get_job_ids()
    control.retry_now(runs.get(run_id), Actor("olga"), clock=clock)
    assert execute(run_id, 1, clock=clock) == "succeeded"
    assert delayed in reconcile().dropped_jobs
    assert scheduled.get_job_ids() == []


def test_reconcile_clears_rqs_failed_jobs_once_their_runs_have_finished(runs, clock):
    """A database outage left jobs failed in RQ's hands whose runs the reconciler then saw through: Queues & workers
    counted them as "Failed in RQ" for a day, though nothing was wrong any more."""
    from rq import Queue
    from rq.job import Job

    from console.redis_conn import get_redis

    finished, still_running = runs.submit("demo.noop"), runs.submit("demo.noop")
    queue = Queue(queueing.RUN_QUEUE, connection=get_redis())
    for run_id in (finished, still_running):  # each one's first job, failed in RQ's hands
        job = Job.fetch(f"run-{run_id}-s1-a0", connection=get_redis())
        queue.remove(job)
        queue.failed_job_registry.add(job, exc_string="OperationalError: the database system is shutting down")
    failed = queue.failed_job_registry
    assert execute(finished, 0, clock=clock) == "succeeded"
    report = reconcile()
    assert report.dropped_jobs == [f"run-{finished}-s1-a0"]
    assert failed.get_job_ids() == [f"run-{still_running}-s1-a0"]  # its run is not through yet: kept
    assert not Job.exists(f"run-{finished}-s1-a0", connection=get_redis())
