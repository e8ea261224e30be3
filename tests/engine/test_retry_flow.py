"""Seed 000's acceptance cases, end to end through real RQ workers and a real Redis."""

import subprocess

import pytest
from rq.registry import ScheduledJobRegistry
from sqlalchemy import select

from console.extensions import db
from console.models import AttemptDiagnostics, Run, WorkOrder
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.engine import control, queueing
from console.services.policies import versions as policies
from tests.helpers import wait_for

NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 10}


def test_d1_delayed_retry_succeeds(runs, workers):
    workers()
    run_id = runs.submit("demo.flaky", {"fail_times": 2}, policy={**NO_JITTER, "max_attempts": 3})
    run = runs.wait(run_id, "succeeded")
    assert (run.attempt, run.result) == (3, {"succeeded_on_execution": 3})
    waits = runs.events(run_id, "retry_wait")
    starts = runs.events(run_id, "running")
    assert [round((w.next_retry_at - w.at).total_seconds(), 3) for w in waits] == [1.0, 2.0]
    # Each retry started no earlier than its policy said.
    for wait, start in zip(waits, starts[1:], strict=True):
        assert start.at >= wait.next_retry_at
    assert [e.error_code for e in waits] == ["flaky", "flaky"]
    assert len({e.retry_token for e in starts}) == 3  # a new retry_token per attempt


def test_d2_exhausted_retries_stop_and_open_a_work_order(runs, workers):
    workers()
    run_id = runs.submit("demo.flaky", {"fail_times": 9, "message": "upstream 502 for order 4411"},
                         policy={**NO_JITTER, "max_attempts": 2})
    run = runs.wait(run_id, "dead")
    assert (run.attempt, run.status_reason, run.error_code) == (2, "exhausted", "flaky")
    [letter] = runs.dead_letters(run_id)
    assert (letter.reason, letter.attempts, letter.status) == ("exhausted", 2, "open")
    order = db.session.get(WorkOrder, letter.work_order_id)
    assert order.status == "open" and order.dead_letter_count == 1
    kinds = {(m.kind, m.payload.get("rule")) for m in runs.outbox()}
    assert ("workorder", None) in kinds and ("alert", "retry_limit_reached") in kinds


def test_same_error_group_shares_one_work_order_and_one_pending_alert(runs, workers):
    workers()
    ids = [runs.submit("demo.flaky", {"fail_times": 9, "error": "fatal", "message": f"bad row {n}"})
           for n in range(3)]
    for run_id in ids:
        runs.wait(run_id, "dead")
    letters = [runs.dead_letters(run_id)[0] for run_id in ids]
    assert len({letter.fingerprint for letter in letters}) == 1
    assert len({letter.work_order_id for letter in letters}) == 1
    [alert] = runs.outbox("alert")
    assert alert.occurrences == 3


def test_a_policy_change_takes_effect_on_the_next_attempt(app, runs, workers):
    # A first wait long enough for a loaded machine to see it and save the change before it ends.
    policies.save("tight", {**NO_JITTER, "base_delay_s": 5, "max_attempts": 2}, Actor("test"))
    workers()
    run_id = runs.submit("demo.flaky", {"fail_times": 2}, policy="tight")
    runs.wait(run_id, "retry_wait")
    # Saved during the first wait (5 s): a third attempt is allowed, after a shorter wait.
    policies.save("tight", {**NO_JITTER, "base_delay_s": 0.25, "max_attempts": 3}, Actor("ops"))
    run = runs.wait(run_id, "succeeded", "dead")
    assert (run.status, run.attempt, run.policy_version) == ("succeeded", 3, 2)
    assert [e.data["policy_version"] for e in runs.events(run_id, "running")] == [1, 2, 2]
    assert [e.data["delay_s"] for e in runs.events(run_id, "retry_wait")] == [5.0, 0.5]


def test_non_retryable_goes_straight_to_dead(runs, workers):
    workers()
    run_id = runs.submit("demo.flaky", {"fail_times": 1, "error": "fatal", "code": "bad_input"})
    run = runs.wait(run_id, "dead")
    assert (run.attempt, run.status_reason, run.error_code) == (1, "non_retryable", "bad_input")
    assert [e.kind for e in runs.events(run_id)] == ["submitted", "running", "dead"]


def test_non_retryable_with_an_undo_is_compensated(runs, workers):
    workers()
    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 1, "error": "fatal"})
    run = runs.wait(run_id, "compensated")
    assert [e.kind for e in runs.events(run_id)] == ["submitted", "running", "failed", "compensating", "compensated"]
    assert runs.dead_letters(run_id) == [] and run.finished_at is not None


def test_a_hung_handler_is_stopped_at_its_timeout_and_retried(runs, workers):
    workers()
    run_id = runs.submit("demo.sleep", {"seconds": 30}, policy={**NO_JITTER, "timeout_s": 1, "max_attempts": 1})
    run = runs.wait(run_id, "dead", timeout_s=20)
    assert (run.error_code, run.status_reason) == ("timeout", "exhausted")
    assert 900 <= runs.events(run_id, "dead")[0].duration_ms < 5000
    # Its traceback shows where the handler was when stopped, not the engine's frames only (helper 146).
    (found,) = db.session.execute(select(AttemptDiagnostics).where(AttemptDiagnostics.run_id == run_id)).scalars()
    assert 'demo_harmful.py", line' in found.traceback and ", in sleep" in found.traceback
    assert found.traceback.rstrip().endswith("handler ran past its 1 s timeout and was stopped")


def test_progress_is_visible_while_the_handler_runs(runs, workers):
    workers()
    # Long enough that a loaded machine reads the progress before the handler ends; cancelled once read.
    run_id = runs.submit("demo.sleep", {"seconds": 60})
    run = runs.wait(run_id, "running")
    progress = wait_for(lambda: runs.get(run_id).progress, 15, 0.05, "progress soon after starting")
    assert 0 < progress < 100
    assert "of 60 s" in runs.get(run_id).progress_message
    control.cancel(run, Actor("ops"))
    assert runs.wait(run_id, "cancelled").status == "cancelled"


def test_cancel_stops_a_running_handler_cooperatively(runs, workers):
    workers()
    run_id = runs.submit("demo.sleep", {"seconds": 20})
    run = runs.wait(run_id, "running")
    control.cancel(run, Actor("ops"))
    run = runs.wait(run_id, "cancelled", timeout_s=10)
    assert run.result["cancelled"] is True and run.result["slept_s"] < 20


def test_cancel_stops_a_running_command_at_once_and_its_breaker_counts_nothing(app, runs, workers, tmp_path):
    # A command has no cancellation check: it ran its 120 s to the end holding a worker, then read cancelled with its
    # work done and a Replay button (helper 169). Its process is stopped now.
    commands = tmp_path / "commands.yaml"
    # A wrapper script: its child holds the output pipes too (signalled alone, the shell went and `sleep` ran on).
    commands.write_text("long:\n  argv: [sh, -c, 'sleep 117; echo done']\n")
    app.config["COMMANDS_FILE"] = str(commands)
    workers()
    policy = {"max_attempts": 3, "breaker": {"failure_threshold": 1, "open_s": 60, "success_threshold": 1}}
    run_id = runs.submit("command:long", policy=policy)
    run = runs.wait(run_id, "running")
    control.cancel(run, Actor("ops"))
    run = runs.wait(run_id, "cancelled", timeout_s=15)
    assert (run.status_reason, run.error_code, run.executions) == ("cancel_requested", "cancelled", 1)
    assert (run.finished_at - run.started_at).total_seconds() < 15
    assert "was stopped: its run was asked to stop" in run.error_message
    assert subprocess.run(["pgrep", "-f", "sleep 117"], capture_output=True).returncode == 1  # nothing left running
    from console.services.engine import breakers
    assert not breakers.exists(breakers.BreakerKey("command:long"))  # a person's stop says nothing of its health


def test_cancel_of_a_waiting_run_is_immediate_and_no_worker_runs_it(runs, workers):
    run_id = runs.submit("demo.noop")
    control.cancel(runs.get(run_id), Actor("ops"))
    workers()
    run_id_2 = runs.submit("demo.noop")
    runs.wait(run_id_2, "succeeded")  # the worker has drained the queue past the cancelled run
    assert runs.status(run_id) == "cancelled"
    assert runs.events(run_id, "running") == []


@pytest.mark.parametrize("kind", ["simple", "fork"])
def test_both_worker_kinds_run_work(runs, workers, kind):
    workers(kind)
    ids = [runs.submit("demo.noop") for _ in range(5)]
    for run_id in ids:
        assert runs.wait(run_id, "succeeded").attempt == 1
    assert db.session.query(Run).filter(Run.status == "succeeded").count() == 5


def test_a_run_deferred_by_its_concurrency_limit_starts_once_the_slot_frees(runs, workers):
    busy = runs.submit("demo.noop", policy={"concurrency": 1})
    # Another worker holds the only slot.
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": busy})
    db.session.commit()
    waiting = runs.submit("demo.noop", policy={"concurrency": 1})
    workers()
    scheduled = ScheduledJobRegistry(queueing.RETRY_QUEUE, connection=get_redis())
    # Its attempt job ran, found no room, and put itself back on RQ's schedule under a deferral's job id.
    wait_for(lambda: any(job.startswith(f"{queueing.job_id(waiting, 1, 0)}-d") for job in scheduled.get_job_ids()),
             15, 0.05, "the deferral")
    assert runs.status(waiting) == "pending"
    db.session.execute(db.text("UPDATE runs SET status = 'succeeded' WHERE id = :id"), {"id": busy})
    db.session.commit()
    # The deferred job itself comes back (the reconciler, which would also requeue it, is not running here).
    assert runs.wait(waiting, "succeeded", timeout_s=15).attempt == 1


def test_runs_waiting_for_one_slot_start_oldest_first(runs, workers):
    busy = runs.submit("demo.noop", policy={"concurrency": 1})
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": busy})
    db.session.commit()
    waiting = [runs.submit("demo.noop", policy={"concurrency": 1}) for _ in range(3)]
    workers()
    workers()
    wait_for(lambda: all(runs.get(run_id).wait_reason for run_id in waiting), 15, 0.05, "every run to wait")
    db.session.execute(db.text("UPDATE runs SET status = 'succeeded' WHERE id = :id"), {"id": busy})
    db.session.commit()
    # A run submitted as the slot frees reaches a worker at once, while the waiting ones ask again within a second.
    waiting.append(runs.submit("demo.noop", policy={"concurrency": 1}))
    started = {run_id: runs.wait(run_id, "succeeded", timeout_s=30).started_at for run_id in waiting}
    assert sorted(waiting, key=started.get) == waiting
