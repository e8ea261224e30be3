"""Structured logs: one JSON object per line, one line per run state change with the seeds' fields, no secrets."""

import io
import json
import logging
import os
import sys

import pytest

from console import config, logs
from console.services.actor import Actor
from console.services.engine import registry
from console.services.engine.execute import execute
from console.services.people import tenants
from console.services.scheduling import planner, tasks
from tests.factories import Runs
from tests.helpers import wait_for, wait_stopped

NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 60, "max_attempts": 2}
SEED_FIELDS = {"task_id", "tenant_id", "run_id", "retry_token", "attempt", "reason", "next_retry_at", "dlq_flag",
               "workorder_id", "trigger_time", "actual_start", "duration_ms", "status", "error_code", "trace_id"}
TOKEN = "rb_Abc1234XyZsecretpartOfTheToken_0123456789abc"
SLACK = "https://hooks.slack.com/services/T0001/B0002/verysecretpath"


@pytest.fixture
def runs(app):
    return Runs()


@pytest.fixture
def captured():
    """Capture the root logger's lines as the CLI would write them in JSON mode."""
    stream = io.StringIO()
    handler = logs.handler("json", stream)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)

    def lines(logger: str | None = None) -> list[dict]:
        parsed = [json.loads(line) for line in stream.getvalue().splitlines()]  # every line is one JSON object
        return [line for line in parsed if logger is None or line["logger"] == logger]

    yield lines
    root.removeHandler(handler)
    root.setLevel(level)


def test_each_state_change_is_one_json_line_with_the_seed_fields(runs, clock, captured):
    run_id = runs.submit("demo.flaky", {"fail_times": 9}, policy=NO_JITTER)
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    run = runs.get(run_id)
    retry_at, started_at, trace_id = run.next_retry_at, run.started_at, run.trace_id
    clock.set(retry_at)
    assert execute(run_id, 1, clock=clock) == "dead"
    changes = [line for line in captured("rebound.runs") if line["run_id"] == run_id]
    timeline = [e for e in runs.events(run_id) if e.to_status and e.kind != "submitted"]
    assert [c["status"] for c in changes] == [e.to_status for e in timeline] == [
        "running", "retry_wait", "pending", "running", "dead"]
    for line in changes:
        assert line.keys() >= SEED_FIELDS
        assert line["ts"].endswith("Z") and line["process"] and line["pid"]
    claim, retry, *_, dead = changes
    assert claim["message"] == f"run {run_id}: pending → running" and claim["level"] == "INFO"
    assert claim["retry_token"] == runs.events(run_id, "running")[0].retry_token and claim["attempt"] == 1
    assert claim["actual_start"] == started_at.isoformat().replace("+00:00", "Z")
    assert claim["trace_id"] == trace_id and claim["tenant_id"] == run.tenant_id and claim["task_id"] is None
    assert retry["reason"] == "retryable" and retry["error_code"] == "flaky" and retry["dlq_flag"] is False
    assert retry["next_retry_at"] == retry_at.isoformat().replace("+00:00", "Z")
    assert isinstance(retry["duration_ms"], int) and retry["retry_count"] == 0
    assert dead["level"] == "WARNING" and dead["dlq_flag"] is True and dead["reason"] == "exhausted"
    assert dead["attempt"] == 2 and dead["retry_count"] == 1
    # Parking names the dead letter and its work order, which exist only once the run is dead.
    [parked] = [line for line in captured("rebound.engine") if line.get("dead_letter_id")]
    [letter] = runs.dead_letters(run_id)
    assert parked["workorder_id"] == letter.work_order_id is not None and parked["dlq_flag"] is True


def test_a_scheduled_run_logs_its_task_and_trigger_time(runs, clock, captured):
    task = tasks.register(tenants.find("default"), {"name": "nightly", "handler": "demo.noop", "cron": "0 2 * * *"},
                          Actor("test"))
    [fired] = planner.fire([planner.Firing(task.id, clock())], Actor("scheduler"), clock)
    clock.advance(12)
    execute(fired.run_id, 0, clock=clock)
    claim, done = [line for line in captured("rebound.runs") if line["run_id"] == fired.run_id]
    assert claim["task_id"] == done["task_id"] == task.id
    assert claim["trigger_time"] == runs.get(fired.run_id).scheduled_for.isoformat().replace("+00:00", "Z")
    assert done["status"] == "succeeded" and done["error_code"] is None


def test_secrets_are_masked_in_messages_fields_and_tracebacks(captured):
    log = logging.getLogger("rebound.test")
    log.warning("POST %s with Authorization: Bearer %s failed", SLACK, TOKEN)
    log.warning('sent {"routing_key": "0123456789abcdef0123456789abcdef", "password": "hunter2hunter2"}')
    log.warning("login url https://ops:pa55word@tickets.example.com/api?token=abc123 password=correct-horse")
    try:
        raise RuntimeError(f"webhook {SLACK} refused {TOKEN}")
    except RuntimeError:
        log.exception("delivery failed", extra={"error_code": f"bad {TOKEN}"})
    text = "\n".join(json.dumps(line) for line in captured("rebound.test"))
    for secret in (TOKEN[10:], "verysecretpath", "T0001", "0123456789abcdef0123456789abcdef", "hunter2", "pa55word",
                   "abc123", "correct-horse"):
        assert secret not in text, secret
    first, second, third, failure = captured("rebound.test")
    assert first["message"] == "POST https://hooks.slack.com/*** with Authorization: ***"
    assert second["message"] == 'sent {"routing_key": "***", "password": "***"}'
    assert "https://tickets.example.com/***" in third["message"] and "password=***" in third["message"]
    assert failure["error_code"] == "bad rb_Abc1234***" and "RuntimeError: webhook https://hooks.slack.com/***" in (
        failure["exc"])


def test_a_secret_percent_encoded_in_a_request_line_is_masked_too():
    """`GET /login?next=/runs%3Fapi_key%3D…` was logged as sent: the patterns read no `api_key=` in it."""
    line = '127.0.0.1 "GET /login?next=/runs%3Fapi_key%3DKEYINNEXT777 HTTP/1.1" 200 1.0 ms'
    record = logging.LogRecord("granian.access", logging.INFO, __file__, 1, line, (), None)
    logs.RedactSecrets([]).filter(record)
    assert "KEYINNEXT777" not in record.msg and "api_key=***" in record.msg


def test_configured_secrets_are_masked_wherever_they_appear(monkeypatch):
    monkeypatch.setenv("REBOUND_PAGERDUTY_ROUTING_KEY", "R0UTINGKEY-plain-words")
    stream = io.StringIO()
    logger = logging.getLogger("rebound.test.configured")
    logger.propagate = False
    logger.addHandler(logs.handler("text", stream))
    logger.warning("pagerduty refused key R0UTINGKEY-plain-words")
    logger.propagate = True
    assert stream.getvalue().rstrip().endswith("pagerduty refused key ***")


def test_the_consoles_own_address_is_no_secret_but_a_webhook_url_is():
    """`Listening at: ***`: the console's address was masked like the channel URLs beside it."""
    env = {"REBOUND_CONSOLE_URL": "http://ops.example.com:8895", "REBOUND_SLACK_WEBHOOK_URL": "https://hooks.x/T0/B0"}
    assert logs.known_secrets(env) == ["https://hooks.x/T0/B0"]


def test_log_format_is_json_unless_a_terminal_and_a_bad_value_is_refused(monkeypatch):
    assert config.log_format({}) == "auto" and config.log_format({"REBOUND_LOG_FORMAT": "JSON"}) == "json"
    with pytest.raises(SystemExit, match="REBOUND_LOG_FORMAT must be one of auto, json, text"):
        config.log_format({"REBOUND_LOG_FORMAT": "xml"})
    text = logs.handler("text", io.StringIO())
    assert not isinstance(text.formatter, logs.JsonFormatter)


def test_a_worker_process_started_by_the_cli_writes_json_lines(runs, workers, tmp_path):
    run_id = runs.submit("demo.noop")
    workers(REBOUND_LOG_LEVEL="INFO")  # stderr goes to a file, not a terminal: JSON by default
    runs.wait(run_id, "succeeded")

    def changes():
        lines = [json.loads(line) for line in (tmp_path / "worker-0.log").read_text().splitlines() if line]
        mine = [line for line in lines if line.get("run_id") == run_id]
        return lines if len(mine) == 2 else None

    lines = wait_for(changes, 10, what="the worker's two log lines about the run")
    claim, done = [line for line in lines if line.get("run_id") == run_id]
    assert (claim["status"], done["status"]) == ("running", "succeeded")
    assert claim["process"] == "worker" and claim["worker_id"] and done.keys() >= SEED_FIELDS


PRINTER = """from console.services.engine.registry import handler


@handler("shout.secret")
def shout(ctx):
    print("calling https://hooks.slack.com/services/T0001/B0001/verysecretpath with password=hunter2")
    print("no newline at the end, token=abc123abc123", end="", flush=True)
"""


@pytest.mark.parametrize("kind", ["simple", "fork"])
def test_what_a_handler_prints_is_masked_as_log_lines_are(runs, workers, tmp_path, monkeypatch, kind):
    (tmp_path / "printer.py").write_text(PRINTER)
    monkeypatch.syspath_prepend(str(tmp_path))
    import printer  # noqa: F401 - registers shout.secret here too, so the submit knows it

    try:
        run_id = runs.submit("shout.secret")
        workers(kind, REBOUND_HANDLER_MODULES="printer", PYTHONPATH=f"{tmp_path}:{os.getcwd()}")
        runs.wait(run_id, "succeeded")
        log = tmp_path / "worker-0.log"
        printed = wait_for(lambda: "token=***" in log.read_text() and log.read_text(), 10, what="the printed lines")
        assert "calling https://hooks.slack.com/*** with password=***\n" in printed
        for secret in ("verysecretpath", "hunter2", "abc123abc123"):
            assert secret not in printed
    finally:
        registry._handlers.pop("shout.secret")
        sys.modules.pop("printer")


def test_a_line_printed_in_pieces_is_masked_whole():
    out = io.StringIO()
    masked = logs.MaskedLines(out, secrets=[])
    for piece in ("pass", "word=hun", "ter2 and more\nnext "):
        masked.write(piece)
    assert out.getvalue() == "password=*** and more\n"
    masked.flush()
    assert out.getvalue().endswith("next ")


def test_a_worker_logs_at_the_configured_level_rq_included(runs, workers, tmp_path):
    quiet = workers(REBOUND_LOG_LEVEL="WARNING")
    run_id = runs.submit("demo.noop")
    runs.wait(run_id, "succeeded")
    quiet.terminate()
    wait_stopped(quiet, tmp_path / "worker-0.log")
    # RQ's own loggers used to be set to INFO by its work loop: two lines per job, whatever the setting said.
    levels = {json.loads(line)["level"] for line in (tmp_path / "worker-0.log").read_text().splitlines() if line}
    assert levels <= {"WARNING", "ERROR", "CRITICAL"}


def test_a_one_shot_command_logs_warnings_only_and_a_serving_process_its_info_lines(monkeypatch):
    from console.cli import _level

    monkeypatch.delenv("REBOUND_LOG_LEVEL", raising=False)
    assert _level(["rebound", "audit", "verify"]) == "WARNING"  # its answer is not buried in INFO lines
    assert _level(["rebound", "--env-file", ".env", "create-user", "bob"]) == "WARNING"
    assert [_level(["rebound", name]) for name in ("up", "web", "worker", "scheduler")] == [None] * 4
    assert _level(["rebound", "-e", ".env", "worker", "--processes", "2"]) is None
    monkeypatch.setenv("REBOUND_LOG_LEVEL", "INFO")  # asked for: it is what it says
    assert _level(["rebound", "audit", "verify"]) is None
