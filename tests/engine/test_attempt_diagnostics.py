"""A failed attempt keeps its traceback and the handler's last log lines: bounded, masked, one row per attempt."""

import logging

from sqlalchemy import select

from console.extensions import db
from console.models import AttemptDiagnostics
from console.services.engine import diagnostics, registry
from console.services.engine.execute import execute

NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 60}


def _rows(run_id):
    return db.session.execute(select(AttemptDiagnostics).where(AttemptDiagnostics.run_id == run_id)
                              .order_by(AttemptDiagnostics.attempt)).scalars().all()


def test_each_failed_attempt_keeps_its_traceback_and_log_lines(runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 2, "log": ["charging account 7", "gateway said no"]},
                         policy={**NO_JITTER, "max_attempts": 3})
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    clock.advance(5)
    assert execute(run_id, 1, clock=clock) == "retry_wait"
    clock.advance(5)
    assert execute(run_id, 2, clock=clock) == "succeeded"
    rows = _rows(run_id)
    assert [(row.series, row.attempt) for row in rows] == [(1, 1), (1, 2)]  # none for the success
    assert "Traceback (most recent call last)" in rows[0].traceback
    assert "RetryableError" in rows[0].traceback and "flaky failure 1 of 2" in rows[0].traceback
    assert [line.split(" ", 1)[1] for line in rows[0].log_lines] == [
        "WARNING jobs.handlers.demo: charging account 7", "WARNING jobs.handlers.demo: gateway said no"]


def test_secrets_are_masked_and_sizes_bounded(runs, clock):
    noisy = [f"line {i} password=hunter2-{i}" for i in range(60)] + ["x" * 5000]
    run_id = runs.submit("demo.flaky", {"fail_times": 1, "error": "fatal", "log": noisy,
                                        "message": "token=abcdef123456 refused " + "y" * 20_000})
    assert execute(run_id, 0, clock=clock) == "dead"
    [row] = _rows(run_id)
    assert len(row.log_lines) <= diagnostics.MAX_LINES
    assert all(len(line) <= diagnostics.MAX_LINE_CHARS for line in row.log_lines)
    assert sum(len(line.encode()) + 1 for line in row.log_lines) <= diagnostics.MAX_BYTES
    assert not any("hunter2" in line for line in row.log_lines)
    assert "password=***" in row.log_lines[0]
    assert len(row.traceback.encode()) <= diagnostics.MAX_BYTES
    assert "abcdef123456" not in row.traceback
    assert row.traceback.startswith("… ") and "bytes cut" in row.traceback.splitlines()[0]


def test_only_the_handlers_thread_is_captured():
    import threading

    with diagnostics.Capture() as captured:
        logging.getLogger("mine").warning("from the handler")
        other = threading.Thread(target=lambda: logging.getLogger("other").warning("from the heartbeat"))
        other.start()
        other.join()
    assert [line.split(" ", 1)[1] for line in captured.lines] == ["WARNING mine: from the handler"]
    assert all(not isinstance(h, diagnostics.LogTail) for h in logging.getLogger().handlers)


def test_a_forked_handlers_traceback_and_log_lines_come_from_its_child(app, runs, clock):
    app.config["ISOLATE_HANDLERS"] = True
    run_id = runs.submit("demo.flaky", {"fail_times": 1, "error": "fatal", "log": "in the child"})
    assert execute(run_id, 0, clock=clock) == "dead"
    [row] = _rows(run_id)
    assert "jobs/handlers/demo.py" in row.traceback  # the child's frames, not only the parent's re-raise
    assert [line.split(" ", 1)[1] for line in row.log_lines] == ["WARNING jobs.handlers.demo: in the child"]


def test_storing_the_same_attempt_twice_keeps_one_row(runs, clock):
    run_id = runs.submit("demo.noop")
    found = diagnostics.Diagnostics("Traceback ...", ["a"])
    diagnostics.store(run_id, 1, 1, found, clock())
    diagnostics.store(run_id, 1, 1, diagnostics.Diagnostics("other", []), clock())
    db.session.commit()
    assert [(row.traceback, row.log_lines) for row in _rows(run_id)] == [("Traceback ...", ["a"])]


KEY = "sk_live_ABCDEF1234567890"


def test_a_secret_param_is_masked_by_value_wherever_the_run_shows_what_it_did(runs, clock):
    """`upstream refused key sk_live_…` (no `key=`, so no pattern) reached every viewer: the run's error, its dead
    letter and work order, the traceback, the log lines, the API (helper 120)."""
    run_id = runs.submit("demo.flaky", {"fail_times": 1, "error": "fatal", "credentials": {"api_key": KEY},
                                        "message": f"upstream refused key {KEY}", "log": f"calling with {KEY}"})
    assert execute(run_id, 0, clock=clock) == "dead"
    run, [row] = runs.get(run_id), _rows(run_id)
    assert run.error_message == "upstream refused key ***"
    assert runs.dead_letters(run_id)[0].error_message == "upstream refused key ***"
    assert KEY not in row.traceback and "upstream refused key ***" in row.traceback
    assert row.log_lines and not any(KEY in line for line in row.log_lines)


def test_a_handlers_result_keeps_no_secret_it_was_given(runs, clock):
    """A result {"token": <the api_key it was given>} was shown whole to viewers, where a command's was masked."""
    @registry.handler("echo.secret")
    def echo(ctx):
        return {"token": ctx.params["api_key"], "said": f"used {ctx.params['api_key']}", "count": 2}

    try:
        run_id = runs.submit("echo.secret", {"api_key": KEY})
        assert execute(run_id, 0, clock=clock) == "succeeded"
        assert runs.get(run_id).result == {"token": "***", "said": "used ***", "count": 2}
    finally:
        registry._handlers.pop("echo.secret")
