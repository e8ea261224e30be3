"""Seed 003's timeout anomaly alert fed by real timeouts: a real `rebound worker` stops hung handlers."""

from datetime import timedelta

import pytest

from console.domain.clock import utcnow
from console.services.actor import Actor
from console.services.system import alert_rules
from tests.integration.test_alert_rules import messages, rule
from tests.integration.test_alert_rules_seeds import timed_out

ADMIN = Actor("test-admin")
# One attempt, stopped after a second: each run is one real timeout, then dead.
HUNG = {"timeout_s": 1, "max_attempts": 1, "jitter": 0}
STEADY, SPIKING = "command:slow", "python:demo.sleep"


@pytest.fixture
def commands_file(app, tmp_path):
    path = tmp_path / "commands.yaml"
    path.write_text("slow:\n  argv: [sleep, '30']\n  timeout_s: 1\n")
    app.config["COMMANDS_FILE"] = str(path)  # the workers are given it through their environment
    return path


def _history(runs, clock, handler: str, per_day: int) -> None:
    """Record a handler's usual timeouts, per_day each day of the week before the window (the clock is moved)."""
    now = utcnow()
    for day in range(1, 8):
        clock.set(now - timedelta(days=day, hours=12))  # 1.5 to 7.5 days ago: inside the week before today
        for _ in range(per_day):
            timed_out(runs, clock, handler.removeprefix("python:"))


def _time_out_for_real(runs, handler: str, count: int) -> None:
    params = {"seconds": 30} if handler == SPIKING else None
    run_ids = [runs.submit(handler, params, policy=HUNG) for _ in range(count)]
    for run_id in run_ids:
        run = runs.wait(run_id, "dead", timeout_s=60)
        assert (run.error_code, run.status_reason) == ("timeout", "exhausted")


def test_timeout_anomaly_names_the_handler_timing_out_above_its_usual_rate_not_one_at_its_usual_rate(
        runs, workers, clock, commands_file):
    # A day's window, as in the rule's own test: a usual rate of a few a day needs a few rows per day of history.
    alert_rules.update_rule("timeout_anomaly", {"window_s": 86_400}, ADMIN, clock=clock)
    _history(runs, clock, STEADY, per_day=5)  # usually 5 a day
    _history(runs, clock, SPIKING, per_day=1)  # usually 1 a day
    # Two real workers: each batch's five hung runs wait out their timeouts two at a time, not one after another.
    workers()
    workers()

    _time_out_for_real(runs, STEADY, 5)  # today as usual
    clock.set(utcnow())  # the worker wrote the timeouts at the real time: measure just after them
    assert "timeout_anomaly" not in alert_rules.evaluate(clock)
    row = rule("timeout_anomaly")
    # The measure saw the worker's real timeouts: the handler is named with its count, at its usual rate.
    assert (row.state, row.detail) == ("ok", f"{STEADY} timed out 5 times, 1.0× its usual 5.0 (over the 7 days before)")
    assert messages("timeout_anomaly") == []

    _time_out_for_real(runs, SPIKING, 5)  # five times its usual one
    clock.set(utcnow())
    assert alert_rules.evaluate(clock).get("timeout_anomaly") == "firing"
    row = rule("timeout_anomaly")
    assert row.state == "firing" and row.last_value == pytest.approx(5.0)
    [alert] = messages("timeout_anomaly")
    assert alert.payload["summary"] == (f"{SPIKING} timed out 5 times, 5.0× its usual 1.0 (over the 7 days before) "
                                        "in the last 24 h (5×; threshold 3×).")
    assert STEADY not in alert.payload["summary"]
