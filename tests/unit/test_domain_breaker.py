import json
from datetime import UTC, datetime, timedelta

import pytest

from console.domain.breaker import (
    BreakerMode,
    BreakerSettings,
    BreakerState,
    Opener,
    allow,
    current,
    mode_event,
    record_failure,
    record_success,
)
from console.domain.policy import RetryPolicy

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SETTINGS = BreakerSettings(failure_threshold=5, open_s=30, success_threshold=3, probe_timeout_s=60)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def fail_times(state: BreakerState, times: int, now: datetime = T0) -> tuple[BreakerState, list]:
    events = []
    for _ in range(times):
        state, event = record_failure(state, now, SETTINGS)
        events.append(event)
    return state, events


def opened() -> BreakerState:
    state, _ = fail_times(BreakerState(), 5)
    return state


def test_closed_breaker_allows_calls():
    allowed, state, retry_at = allow(BreakerState(), T0, SETTINGS)
    assert allowed and retry_at is None and state == BreakerState()


def test_breaker_opens_after_n_consecutive_failures():
    state, events = fail_times(BreakerState(), 5)
    assert events == [None, None, None, None, "opened"]
    assert state.state == BreakerMode.OPEN
    assert state.opened_at == T0 and state.open_until == at(30)


def test_a_success_resets_the_failure_count_while_closed():
    state, _ = fail_times(BreakerState(), 4)
    state, event = record_success(state, T0, SETTINGS)
    assert event is None and state.consecutive_failures == 0
    state, events = fail_times(state, 4)
    assert state.state == BreakerMode.CLOSED and events == [None] * 4


def test_open_breaker_defers_until_open_until():
    allowed, state, retry_at = allow(opened(), at(10), SETTINGS)
    assert not allowed and retry_at == at(30)
    assert state.state == BreakerMode.OPEN


def test_late_results_while_open_do_not_extend_the_open_window():
    state, event = record_failure(opened(), at(20), SETTINGS)
    assert event is None and state.open_until == at(30)
    state, event = record_success(state, at(25), SETTINGS)
    assert event is None and state.state == BreakerMode.OPEN


def test_open_breaker_reads_as_half_open_after_the_timeout():
    state = opened()
    assert current(state, at(29)).state == BreakerMode.OPEN
    half = current(state, at(30))
    assert half.state == BreakerMode.HALF_OPEN
    assert mode_event(state, half) == "half_opened"


def test_half_open_lets_exactly_one_probe():
    allowed, state, _ = allow(opened(), at(31), SETTINGS)
    assert allowed and state.probe_in_flight and state.probe_expires_at == at(91)
    for offset in (31, 40, 90):
        allowed, state, retry_at = allow(state, at(offset), SETTINGS)
        assert not allowed and retry_at == at(offset + 5)


def test_a_lost_probe_frees_its_slot_after_the_probe_timeout():
    _, state, _ = allow(opened(), at(31), SETTINGS)
    allowed, state, _ = allow(state, at(91), SETTINGS)
    assert allowed and state.probe_expires_at == at(151)


def test_half_open_closes_after_m_successes_each_releasing_the_probe():
    _, state, _ = allow(opened(), at(31), SETTINGS)
    events = []
    for step in range(3):
        now = at(32 + step)
        state, event = record_success(state, now, SETTINGS)
        events.append(event)
        if step < 2:
            assert state.state == BreakerMode.HALF_OPEN and not state.probe_in_flight
            allowed, state, _ = allow(state, now, SETTINGS)
            assert allowed  # the next probe may go
    assert events == [None, None, "closed"]
    assert state == BreakerState()


def test_half_open_failure_reopens_with_a_new_window():
    _, state, _ = allow(opened(), at(31), SETTINGS)
    state, _ = record_success(state, at(32), SETTINGS)
    state, event = record_failure(state, at(40), SETTINGS)
    assert event == "opened"
    assert state.state == BreakerMode.OPEN and state.opened_at == at(40) and state.open_until == at(70)
    assert state.consecutive_successes == 0 and not state.probe_in_flight


def test_outcome_on_an_expired_open_state_reports_the_change():
    state, event = record_failure(opened(), at(45), SETTINGS)
    assert event == "opened" and state.open_until == at(75)
    state, event = record_success(opened(), at(45), SETTINGS)
    assert event == "half_opened" and state.consecutive_successes == 1


def test_success_threshold_of_one_closes_on_the_first_probe():
    settings = BreakerSettings(failure_threshold=1, open_s=10, success_threshold=1)
    state, event = record_failure(BreakerState(), T0, settings)
    assert event == "opened"
    state, event = record_success(state, at(10), settings)
    assert event == "closed" and state.state == BreakerMode.CLOSED


def test_state_round_trips_through_json():
    _, state, _ = allow(opened(), at(31), SETTINGS)
    data = json.loads(json.dumps(state.to_dict()))
    assert data["state"] == "half_open" and data["open_until"] == at(30).isoformat()
    assert BreakerState.from_dict(data) == state
    assert BreakerState.from_dict({}) == BreakerState()


def test_opening_records_whose_settings_opened_it_until_it_closes():
    settings = BreakerSettings(failure_threshold=2, open_s=120, success_threshold=1, policy_id=7, policy_version=3)
    state, _ = record_failure(BreakerState(), T0, settings)
    assert state.opened_by is None
    state, event = record_failure(state, T0, settings)
    assert event == "opened" and state.opened_by == Opener(7, 3, failure_threshold=2, open_s=120)
    assert BreakerState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    _, probing, _ = allow(state, at(121), SETTINGS)  # another policy's call probes: the opener is kept
    assert probing.opened_by == state.opened_by
    closed, event = record_success(probing, at(122), settings)
    assert event == "closed" and closed.opened_by is None


def test_settings_come_from_the_policy():
    policy = RetryPolicy(
        breaker_failure_threshold=2, breaker_open_s=90, breaker_success_threshold=4, timeout_s=45
    )
    assert BreakerSettings.from_policy(policy) == BreakerSettings(2, 90, 4, 45)


@pytest.mark.parametrize("field", ["failure_threshold", "open_s", "success_threshold", "probe_timeout_s"])
def test_settings_must_be_positive(field):
    with pytest.raises(ValueError, match=field):
        BreakerSettings(**{field: 0})


def test_the_state_names_the_probe_run_while_it_holds_the_slot_and_the_run_whose_failure_opened_it():
    state, _ = fail_times(BreakerState(), 4)
    state, _ = record_failure(state, T0, SETTINGS, run_id=7)
    assert (state.state, state.opened_by_run) == (BreakerMode.OPEN, 7)
    allowed, probing, _ = allow(state, at(31), SETTINGS, run_id=8)
    assert allowed and probing.probe_run == 8
    assert BreakerState.from_dict(json.loads(json.dumps(probing.to_dict()))) == probing  # kept in Redis as JSON
    succeeded, _ = record_success(probing, at(32), SETTINGS)
    assert succeeded.state == BreakerMode.HALF_OPEN and succeeded.probe_run is None  # the next probe takes the slot
    reopened, _ = record_failure(allow(succeeded, at(33), SETTINGS, run_id=9)[1], at(34), SETTINGS, run_id=9)
    assert (reopened.state, reopened.reopened_by_probe, reopened.opened_by_run, reopened.probe_run) == (
        BreakerMode.OPEN, True, 9, None)
    assert current(reopened, at(34 + SETTINGS.open_s)).probe_run is None
