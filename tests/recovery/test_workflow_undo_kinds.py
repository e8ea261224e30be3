"""Every handler kind can be undone in a workflow: Python `compensate`, a plugin's /compensate, a command's `undo`."""

import json
from datetime import timedelta

import pytest

from console.services.engine.execute import execute
from tests.factories import FATAL
from tests.plugin_runtime import PluginRuntime

FAILING_LAST = {"handler": "demo.flaky", "params": FATAL}


@pytest.fixture
def runtime(app):
    server = PluginRuntime()
    app.config["PLUGIN_RUNTIME_URL"] = server.url
    yield server
    server.server.shutdown()


def fail_second_step(saga, first: dict) -> int:
    """Submit [first, a step that fails for good], run both, and let the workflow ask for step 1's undo."""
    workflow_id = saga.submit([first, FAILING_LAST])
    assert saga.execute(workflow_id, 1) == "succeeded"
    saga.advance(workflow_id)
    assert saga.execute(workflow_id, 2) == "dead"
    assert saga.advance(workflow_id) == "undoing"
    return workflow_id


def test_a_plugin_step_is_undone_with_its_execute_body_and_key_retrying_a_503_after_retry_after(saga, runtime, runs):
    runtime.answers = [(200, {}, {"charged": 42}), (503, {"Retry-After": "1"}, {"error": "busy"}),
                       (200, {}, {"refunded": 42})]
    workflow_id = fail_second_step(saga, {"handler": "plugin:payments", "params": {"order": 7}})
    started = saga.clock()
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.clock() - started == timedelta(seconds=1)  # the pause: Retry-After (1 s) beat the 0.5 s backoff
    assert saga.advance(workflow_id) == "compensated"
    execute_call, *undo_calls = runtime.requests
    assert [call["path"] for call in undo_calls] == ["/plugin/runtime/payments/compensate"] * 2
    run = saga.run(workflow_id, 1)
    for call in undo_calls:
        assert call["body"] == execute_call["body"] == {"run_id": run.id, "task": None, "tenant": "default",
                                                        "params": {"order": 7}, "attempt": 1}
        assert call["headers"]["Idempotency-Key"] == execute_call["headers"]["Idempotency-Key"] == run.idempotency_key
    [failed_try] = runs.events(run.id, "compensation_attempt_failed")
    assert failed_try.error_code == "http_503" and failed_try.data["number"] == 1
    assert "http_503" in failed_try.data["traceback"]  # kept for the run page, as an attempt's is


def test_a_plugin_that_answers_404_to_compensate_is_not_compensable(saga, runtime, runs):
    runtime.answers = [(200, {}, {"charged": 42}), (404, {}, {"error": "no such route"})]
    workflow_id = fail_second_step(saga, {"handler": "plugin:payments", "params": {"order": 7}})
    assert saga.undo(workflow_id, 1) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    assert len(runtime.requests) == 2  # one undo call: a 404 is not tried again
    [step, _] = saga.steps(workflow_id)
    assert step.compensation_status == "not_compensable" and "compensate answered 404" in step.note
    assert "step 1 is not compensable" in saga.get(workflow_id).note
    [letter] = runs.dead_letters(saga.run(workflow_id, 1).id)
    assert letter.error_code == "not_compensable"


def test_a_plugins_own_rejection_is_not_undone_but_dead_with_its_error(runs, runtime, clock):
    runtime.answers = [(422, {}, {"error": "amount must be positive"})]
    run_id = runs.submit("plugin:payments", {"amount": -1})
    assert execute(run_id, 0, clock=clock) == "dead"
    assert runs.get(run_id).error_code == "http_422" and len(runtime.requests) == 1


@pytest.fixture
def commands_file(app, tmp_path):
    ledger = tmp_path / "undone.log"
    path = tmp_path / "commands.yaml"
    undo = ("import os, sys; attempt = os.environ['REBOUND_UNDO_ATTEMPT']; "
            f"open({str(ledger)!r}, 'a').write(attempt + ' ' + sys.stdin.read() + chr(10)); "
            "sys.exit(75 if attempt == '1' else 0)")
    path.write_text(json.dumps({
        "reserve": {"argv": ["python3", "-c", "print('reserved')"],
                    "undo": {"argv": ["python3", "-c", undo], "timeout_s": 10}},
        "notify": {"argv": ["python3", "-c", "print('sent')"]},
        "half-declared": {"argv": ["true"], "undo": {"description": "no argv"}},
    }))
    app.config["COMMANDS_FILE"] = str(path)
    return ledger


def test_a_commands_declared_undo_runs_with_the_params_and_is_retried_on_exit_75(saga, commands_file, runs):
    workflow_id = fail_second_step(saga, {"handler": "command:reserve", "params": {"sku": "A-1"}})
    assert saga.undo(workflow_id, 1) == "compensated"
    assert saga.advance(workflow_id) == "compensated"
    tries = [line.split(" ", 1) for line in commands_file.read_text().splitlines()]
    assert [(attempt, json.loads(params)) for attempt, params in tries] == [("1", {"sku": "A-1"}),
                                                                            ("2", {"sku": "A-1"})]
    [failed_try] = runs.events(saga.run(workflow_id, 1).id, "compensation_attempt_failed")
    assert failed_try.error_code == "exit_75"


@pytest.mark.parametrize("command", ["notify", "half-declared"])
def test_a_command_without_an_undo_is_not_compensable(saga, commands_file, command):
    workflow_id = fail_second_step(saga, {"handler": f"command:{command}"})
    assert saga.undo(workflow_id, 1) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    assert saga.steps(workflow_id)[0].compensation_status == "not_compensable"
