"""plugin:<id> handlers against a real local HTTP server."""

import pytest

from console.services.engine.execute import execute
from tests.plugin_runtime import PluginRuntime


@pytest.fixture
def runtime(app):
    server = PluginRuntime()
    app.config["PLUGIN_RUNTIME_URL"] = server.url
    yield server
    server.server.shutdown()


def test_plugin_retry_after_then_success_carries_idempotency_and_retry_tokens(runs, workers, runtime):
    runtime.answers = [(503, {"Retry-After": "1"}, {"error": "busy"}), (200, {}, {"charged": 42})]
    workers()
    run_id = runs.submit("plugin:payments", {"order": 7}, policy={"base_delay_s": 30, "jitter": 0})
    run = runs.wait(run_id, "succeeded")
    assert run.result == {"charged": 42} and run.attempt == 2
    first, second = runtime.requests
    assert first["path"] == "/plugin/runtime/payments/execute"
    assert first["headers"]["Idempotency-Key"] == second["headers"]["Idempotency-Key"] == run.idempotency_key
    tokens = [e.retry_token for e in runs.events(run_id, "running")]
    assert [first["headers"]["X-Retry-Token"], second["headers"]["X-Retry-Token"]] == tokens
    assert tokens[0] != tokens[1]
    assert first["headers"]["X-Trace-Id"] == run.trace_id and run.trace_id in first["headers"]["traceparent"]
    assert first["body"] == {"run_id": run_id, "task": None, "tenant": "default", "params": {"order": 7},
                             "attempt": 1}
    assert second["body"]["attempt"] == 2
    [wait] = runs.events(run_id, "retry_wait")
    assert wait.error_code == "http_503" and wait.data["delay_s"] == 1.0  # Retry-After beat the 30 s backoff


def test_plugin_4xx_is_not_retried(runs, runtime, clock):
    runtime.answers = [(422, {}, {"error": "amount must be positive"})]
    run_id = runs.submit("plugin:payments", {"amount": -1})
    assert execute(run_id, 0, clock=clock) == "dead"
    run = runs.get(run_id)
    assert (run.error_code, run.status_reason) == ("http_422", "non_retryable")
    assert "amount must be positive" in run.error_message


def test_plugin_5xx_and_connection_errors_are_retried(runs, runtime, clock, app):
    runtime.answers = [(500, {}, {"error": "boom"})]
    run_id = runs.submit("plugin:payments")
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    assert runs.get(run_id).error_code == "http_500"
    app.config["PLUGIN_RUNTIME_URL"] = "http://127.0.0.1:9"  # nothing listens on the discard port
    clock.set(runs.get(run_id).next_retry_at)
    assert execute(run_id, 1, clock=clock) == "retry_wait"
    assert runs.get(run_id).error_code == "connection_error"


@pytest.mark.parametrize("url, code", [("", "plugin_runtime_unset"), ("runtime.internal:8080", "plugin_runtime_url"),
                                       ("ftp://runtime.internal", "plugin_runtime_url")])
def test_a_worker_without_a_usable_runtime_url_parks_the_run_with_what_to_fix(runs, runtime, clock, app, url, code):
    """A configuration error fails for good with its fix in the message: retrying it would only open the breaker."""
    run_id = runs.submit("plugin:payments")  # accepted while the web side had the URL
    app.config["PLUGIN_RUNTIME_URL"] = url
    assert execute(run_id, 0, clock=clock) == "dead"
    run = runs.get(run_id)
    assert (run.error_code, run.status_reason) == (code, "non_retryable")
    assert "REBOUND_PLUGIN_RUNTIME_URL" in run.error_message and "then replay" in run.error_message
    assert runtime.requests == []
