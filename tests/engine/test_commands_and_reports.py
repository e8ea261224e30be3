"""command:<name> handlers, failures reported by external executors, and `rebound retry-inspect`."""

import json
import re
import time

import pytest
from sqlalchemy import update

from console.extensions import db
from console.models import Run
from console.services.actor import Actor
from console.services.engine import executor_reports
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.errors import Conflict, InvalidInput
from console.services.people import tenants
from tests.engine.test_concurrent_writers import race


@pytest.fixture
def commands_file(app, tmp_path):
    path = tmp_path / "commands.yaml"
    path.write_text(
        "echo:\n  argv: [python3, -c, 'import sys, os; "
        "print(os.environ[\"REBOUND_IDEMPOTENCY_KEY\"], sys.stdin.read())']\n"
        "later:\n  argv: [python3, -c, 'import sys; print(\"busy\", file=sys.stderr); sys.exit(75)']\n"
        "broken:\n  argv: [python3, -c, 'import sys; sys.exit(3)']\n"
        "chatty:\n  argv: [python3, -c, 'import sys; print(\"login password=hunter2-SECRET\", file=sys.stderr); "
        "sys.exit(3)']\n"
        "slow:\n  argv: [sleep, '30']\n  timeout_s: 1\n"
        "slow-wrapper:\n  argv: [sh, -c, 'sleep 31; echo done']\n  timeout_s: 1\n"
        f"notexec:\n  argv: [{tmp_path / 'notexec.sh'}]\n"
        f"missing:\n  argv: [{tmp_path / 'nosuch'}]\n")
    (tmp_path / "notexec.sh").write_text("#!/bin/sh\necho hi\n")  # mode 644: not executable
    app.config["COMMANDS_FILE"] = str(path)
    return path


def test_a_registered_command_gets_params_on_stdin_and_its_output_is_kept(runs, clock, commands_file):
    run_id = runs.submit("command:echo", {"n": 1})
    assert execute(run_id, 0, clock=clock) == "succeeded"
    run = runs.get(run_id)
    key, params = run.result["stdout"].split(" ", 1)
    assert key == run.idempotency_key and json.loads(params) == {"n": 1}


def test_exit_75_is_retried_other_codes_are_not_and_a_hang_is_stopped(runs, clock, commands_file):
    later, broken, slow = (runs.submit(f"command:{name}") for name in ("later", "broken", "slow"))
    assert execute(later, 0, clock=clock) == "retry_wait"
    assert runs.get(later).error_code == "exit_75" and "busy" in runs.get(later).error_message
    assert execute(broken, 0, clock=clock) == "dead"
    assert runs.get(broken).error_code == "exit_3"
    assert execute(slow, 0, clock=clock) == "retry_wait"
    assert runs.get(slow).error_code == "timeout"
    # A wrapper's child is stopped with it: the attempt ended at its 31 s `sleep` (helper 173).
    wrapped, began = runs.submit("command:slow-wrapper"), time.monotonic()
    assert execute(wrapped, 0, clock=clock) == "retry_wait" and time.monotonic() - began < 10
    assert runs.get(wrapped).error_code == "timeout"


def test_a_commands_secrets_are_masked_in_what_its_run_keeps(runs, clock, commands_file):
    # Its stderr is the run's error message, shown on its page, the DLQ and the API: masked as the logs are.
    run_id = runs.submit("command:chatty")
    assert execute(run_id, 0, clock=clock) == "dead"
    run = runs.get(run_id)
    assert "hunter2" not in run.error_message and "password=***" in run.error_message
    assert "hunter2" not in runs.dead_letters(run_id)[0].error_message


def test_a_command_that_cannot_start_is_dead_at_once_saying_what_to_fix(runs, clock, commands_file):
    """A program not executable, or not there, was retried five times as PermissionError (helper 120)."""
    for name, why in (("notexec", "Permission denied"), ("missing", "No such file or directory")):
        run_id = runs.submit(f"command:{name}")
        assert execute(run_id, 0, clock=clock) == "dead"
        run = runs.get(run_id)
        assert run.error_code == "command_not_runnable" and run.attempt == 1
        assert f"command {name} could not start ({why}: " in run.error_message
        assert "make the program executable (chmod +x) or fix its argv in the commands file" in run.error_message


def test_a_command_that_is_not_registered_cannot_be_submitted(runs, commands_file):
    with pytest.raises(InvalidInput, match="no command named 'rm' .*; known: broken, chatty, echo, later, ") as refused:
        runs.submit("command:rm")
    assert str(commands_file) not in refused.value.detail  # the file is named by its setting, not its path
    assert "REBOUND_COMMANDS_FILE" in refused.value.detail


def test_an_externally_failed_execution_enters_the_retry_flow(runs, clock):
    tenant = tenants.find("default")
    payload = {"idempotency_key": "ext-1", "error_code": "db_timeout", "retryable": True, "handler": "demo.noop",
               "retry_after_s": 5}
    run, _ = executor_reports.report_failure(tenant, payload, Actor("billing"), clock=clock)
    assert (run.status, run.attempt, run.error_code) == ("retry_wait", 1, "db_timeout")
    assert (run.next_retry_at - clock()).total_seconds() == 5
    clock.set(run.next_retry_at)
    assert execute(run.id, 1, clock=clock) == "succeeded"  # Rebound's retry of the external work


def test_a_reported_non_retryable_failure_is_dead_lettered(runs, clock):
    tenant = tenants.find("default")
    run, _ = executor_reports.report_failure(tenant, {"idempotency_key": "ext-2", "error_code": "invalid_account",
                                          "retryable": False, "handler": "demo.noop", "message": "acct 99 closed"},
                                 Actor("billing"), clock=clock)
    assert run.status == "dead"
    assert runs.dead_letters(run.id)[0].error_message == "acct 99 closed"


def test_retry_inspect_shows_the_delay_queue_and_dead_letters(app, runs, clock):
    waiting = runs.submit("demo.flaky", {"fail_times": 5}, policy={"base_delay_s": 60})
    dead = runs.submit("demo.flaky", {"fail_times": 5, "error": "fatal", "code": "bad_row"})
    execute(waiting, 0, clock=clock)
    execute(dead, 0, clock=clock)
    result = app.test_cli_runner().invoke(args=["retry-inspect", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["runs_by_status"] == {"retry_wait": 1, "dead": 1}
    assert data["delay_queue"][0]["handler"] == "python:demo.flaky"
    assert data["dead_letter_queue"][0]["error_code"] == "bad_row"
    text = app.test_cli_runner().invoke(args=["retry-inspect", "--reconcile"]).output
    assert "Reconciled:" in text and "Dead-letter queue (open)" in text and "bad_row" in text
    # Ages read as durations in the tables (it printed oldest_age_s 996900); --json keeps the seconds.
    assert "oldest_age" in text and "oldest_age_s" not in text and re.search(r"\b\d+ d( \d+ h)?\b", text)
    assert isinstance(data["dead_letter_queue"][0]["oldest_age_s"], int)


def test_retry_inspect_lists_the_oldest_dead_letters_by_age_not_by_id(app, runs, clock):
    """An imported letter failed months before the engine's own, yet got the larger id: it was left off the list."""
    from datetime import timedelta

    from console.extensions import db
    from console.models import DeadLetter

    first, imported = (runs.submit("demo.flaky", {"fail_times": 5, "error": "fatal", "code": code})
                       for code in ("recent", "old_import"))
    for run_id in (first, imported):
        execute(run_id, 0, clock=clock)
    letter = db.session.execute(db.select(DeadLetter).where(DeadLetter.run_id == imported)).scalar_one()
    letter.created_at = clock() - timedelta(days=300)
    db.session.commit()
    data = json.loads(app.test_cli_runner().invoke(args=["retry-inspect", "--json"]).output)
    assert [d["error_code"] for d in data["oldest_dead_letters"]] == ["old_import", "recent"]
    assert data["oldest_dead_letters"][0]["age_s"] >= 300 * 86400


def test_a_commands_file_entry_that_cannot_run_is_named_with_what_to_fix(app, runs, tmp_path):
    path = tmp_path / "commands.yaml"
    path.write_text("no-argv:\n  run: echo hi\nstring-argv:\n  argv: echo hi\nslow-typo:\n  argv: [sleep, '1']\n"
                    "  timeout_s: ten\nfine:\n  argv: [true]\n")
    app.config["COMMANDS_FILE"] = str(path)
    tenant = tenants.find("default")
    for name, said in (("no-argv", "has no argv list"), ("string-argv", "has no argv list"),
                       ("slow-typo", "has timeout_s 'ten', not a whole number of seconds")):
        with pytest.raises(InvalidInput, match=f"command '{name}' in the commands file \\(REBOUND_COMMANDS_FILE\\) "
                                               f"{said}"):
            submit(tenant, Actor("test"), handler=f"command:{name}")
    assert submit(tenant, Actor("test"), handler="command:fine")[1]


def test_a_commands_file_that_stops_parsing_is_a_422_not_a_500_and_the_dlq_still_opens(app, client, auth, tmp_path):
    path = tmp_path / "commands.yaml"
    path.write_text("broken: [argv: \n  - unclosed\n")
    app.config["COMMANDS_FILE"] = str(path)
    with pytest.raises(InvalidInput, match=r"the commands file \(REBOUND_COMMANDS_FILE\) is not valid YAML"):
        submit(tenants.find("default"), Actor("test"), handler="command:broken")
    auth.as_role("viewer")
    assert client.get("/dlq/").status_code == 200  # its handler filter lists no commands meanwhile


@pytest.mark.parametrize(("report", "status"), [
    ({"retryable": True, "retry_after_s": 60}, "retry_wait"), ({"retryable": False}, "dead")])
def test_a_report_sent_again_changes_nothing_and_says_duplicate(runs, clock, report, status):
    tenant = tenants.find("default")
    payload = {"idempotency_key": "ext-3", "error_code": "db_timeout", "handler": "demo.noop", **report}
    run, again = executor_reports.report_failure(tenant, payload, Actor("billing"), clock=clock)
    assert (run.status, again) == (status, False)
    before = [event.id for event in runs.events(run.id)]
    # The executor timed out waiting for the answer and sends the same report again (it was a 409).
    run, again = executor_reports.report_failure(tenant, payload, Actor("billing"), clock=clock)
    assert (run.status, again) == (status, True) and [event.id for event in runs.events(run.id)] == before
    assert len(runs.dead_letters(run.id)) == (status == "dead")
    # Another failure for a run that is not running is still refused.
    with pytest.raises(Conflict, match="only a running run can fail"):
        executor_reports.report_failure(tenant, {**payload, "error_code": "other"}, Actor("billing"), clock=clock)


def test_a_report_names_its_attempt_by_its_token_so_a_late_resend_fails_no_later_attempt(runs, clock):
    # Attempt 1's report, sent again after a timeout while attempt 2 ran, failed attempt 2: a healthy run died
    # (helper 113). The token says which attempt a report is about.
    tenant = tenants.find("default")
    run, _ = submit(tenant, Actor("billing"), handler="demo.noop", idempotency_key="ext-token", clock=clock,
                    policy={"max_attempts": 2, "base_delay_s": 1, "jitter": 0})
    db.session.execute(update(Run).where(Run.id == run.id).values(status="running", attempt=1, retry_token="tok-1"))
    db.session.commit()
    payload = {"idempotency_key": "ext-token", "error_code": "upstream_503", "retryable": True, "retry_token": "tok-1"}
    assert executor_reports.report_failure(tenant, payload, Actor("billing"), clock=clock)[0].status == "retry_wait"
    db.session.execute(update(Run).where(Run.id == run.id).values(status="running", attempt=2, retry_token="tok-2"))
    db.session.commit()
    again, duplicate = executor_reports.report_failure(tenant, payload, Actor("billing"), clock=clock)
    assert duplicate and runs.status(run.id) == "running"  # attempt 2 goes on
    with pytest.raises(Conflict, match="retry_token is not run .* current attempt's .no attempt of this run has it"):
        executor_reports.report_failure(tenant, {**payload, "retry_token": "bogus"}, Actor("billing"), clock=clock)
    with pytest.raises(Conflict, match="it is attempt 1's, which is over"):
        executor_reports.report_failure(tenant, {**payload, "error_code": "other"}, Actor("billing"), clock=clock)
    assert runs.status(run.id) == "running" and len(runs.events(run.id, "failure_reported")) == 1
    current = {**payload, "retry_token": "tok-2", "retryable": False}
    assert executor_reports.report_failure(tenant, current, Actor("billing"), clock=clock)[0].status == "dead"


def test_the_same_report_sent_at_once_by_several_threads_is_one_failure_and_the_rest_duplicates(app, runs, clock):
    """An executor's retries racing its first send: one or two of twelve got 409 "changed meanwhile" (helper 104)."""
    tenant = tenants.find("default")
    run, _ = submit(tenant, Actor("billing"), handler="demo.noop", idempotency_key="ext-race", clock=clock)
    db.session.execute(update(Run).where(Run.id == run.id).values(status="running", attempt=1, started_at=clock()))
    db.session.commit()
    payload = {"idempotency_key": "ext-race", "error_code": "db_timeout", "retryable": True, "retry_after_s": 60}
    # Each thread reads the tenant in its own session: the test's row, expired by its commit, was refreshed by six
    # threads at once through one session ("concurrent operations are not permitted", once in a full run).
    outcomes = race(app, 6, lambda _: executor_reports.report_failure(tenants.find("default"), payload,
                                                                      Actor("billing"), clock=clock)[1])
    assert sorted(outcomes, key=str) == [False] + [True] * 5, outcomes
    assert runs.status(run.id) == "retry_wait" and len(runs.events(run.id, "failure_reported")) == 1

