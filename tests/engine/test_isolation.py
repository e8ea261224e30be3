"""Fork workers call each handler in a child process: what the handler did or raised reaches the run unchanged."""

from datetime import timedelta

import pytest

from console.services.actor import Actor
from console.services.engine import control
from console.services.engine.execute import execute

NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 60}


@pytest.fixture
def isolated(app):
    app.config["ISOLATE_HANDLERS"] = True


def test_a_handler_that_kills_its_process_only_kills_the_child(runs, clock, isolated):
    run_id = runs.submit("demo.crash", policy=NO_JITTER)
    assert execute(run_id, 0, clock=clock) == "retry_wait"  # this test's process is still here to see it
    run = runs.get(run_id)
    assert run.error_code == "handler_crashed"
    assert "killed by signal 9 (SIGKILL)" in run.error_message
    assert run.next_retry_at is not None


def test_results_and_progress_come_back_from_the_child(runs, clock, isolated):
    run_id = runs.submit("demo.sleep", {"seconds": 0.2})
    assert execute(run_id, 0, clock=clock) == "succeeded"
    run = runs.get(run_id)
    assert run.result == {"slept_s": 0.2}
    assert run.progress == 100 and run.attempt == 1


def test_retry_after_crosses_the_process_boundary(runs, clock, isolated):
    run_id = runs.submit("demo.flaky", {"fail_times": 1, "retry_after_s": 7, "code": "rate_limited"},
                         policy=NO_JITTER)
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    run = runs.get(run_id)
    assert (run.error_code, run.next_retry_at - clock()) == ("rate_limited", timedelta(seconds=7))


def test_non_retryable_and_unexpected_errors_are_classified_as_in_process(runs, clock, isolated):
    fatal = runs.submit("demo.flaky", {"fail_times": 1, "error": "fatal", "code": "bad_input"})
    assert execute(fatal, 0, clock=clock) == "dead"
    assert runs.get(fatal).error_code == "bad_input"
    unexpected = runs.submit("demo.sleep", {"seconds": "soon"}, policy=NO_JITTER)
    assert execute(unexpected, 0, clock=clock) == "retry_wait"  # float("soon"): a ValueError, retried
    run = runs.get(unexpected)
    assert run.error_code == "ValueError" and "soon" in run.error_message


def test_compensation_runs_in_a_child_too(runs, clock, isolated):
    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 1, "error": "compensable"})
    assert execute(run_id, 0, clock=clock) == "compensated"
    assert [event.kind for event in runs.events(run_id)][-3:] == ["failed", "compensating", "compensated"]


def test_a_hung_handler_is_killed_at_its_timeout(runs, clock, isolated):
    run_id = runs.submit("demo.sleep", {"seconds": 30}, policy={**NO_JITTER, "timeout_s": 1})
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    run = runs.get(run_id)
    assert run.error_code == "timeout" and "1 s timeout" in run.error_message
    assert runs.events(run_id, "retry_wait")[0].duration_ms < 5000


def test_a_fork_worker_survives_a_crashing_handler_and_passes_on_a_cancel(runs, workers):
    worker = workers("fork")
    crashed = runs.submit("demo.crash", policy={"max_attempts": 1})
    assert runs.wait(crashed, "dead").error_code == "handler_crashed"
    sleeping = runs.submit("demo.sleep", {"seconds": 20})
    run = runs.wait(sleeping, "running")
    assert run.worker_id.endswith(f".{worker.pid}")  # bookkeeping is the worker's own, not a child's
    control.cancel(run, Actor("ops"))
    run = runs.wait(sleeping, "cancelled", timeout_s=10)
    assert run.result["cancelled"] is True and run.result["slept_s"] < 20
    assert worker.poll() is None  # the worker itself never went down
