import json
import random

import pytest

from console.domain.breaker import BreakerSettings
from console.domain.policy import (
    PolicyError,
    RetryPolicy,
    backoff_delay,
    delay_bounds,
    retry_delay,
    retry_schedule,
    too_long_codes,
)


def test_defaults_match_the_seeds():
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.base_delay_s, policy.multiplier) == (5, 2.0, 2.0)
    assert (policy.max_delay_s, policy.jitter, policy.timeout_s) == (300.0, 0.2, 300)
    assert BreakerSettings.from_policy(policy) == BreakerSettings(5, 30, 3, 300)
    assert policy.max_start_delay_s is None and policy.deadline_s is None


def test_from_mapping_reads_flat_form():
    policy = RetryPolicy.from_mapping(
        {"max_attempts": 3, "base_delay_s": 1, "retryable_codes": ["timeout"], "deadline_s": 600}
    )
    assert policy.max_attempts == 3
    assert policy.base_delay_s == 1.0 and isinstance(policy.base_delay_s, float)
    assert policy.retryable_codes == ("timeout",)
    assert policy.deadline_s == 600


def test_from_mapping_reads_nested_breaker_and_sla():
    policy = RetryPolicy.from_mapping(
        {
            "breaker": {"failure_threshold": 7, "open_s": 60, "success_threshold": 2},
            "sla": {"max_start_delay_s": 60, "deadline_s": 900},
        }
    )
    assert BreakerSettings.from_policy(policy) == BreakerSettings(7, 60, 2, 300)
    assert (policy.max_start_delay_s, policy.deadline_s) == (60, 900)


def test_to_dict_is_flat_json_and_round_trips():
    policy = RetryPolicy(retryable_codes=("timeout", "http_503"), non_retryable_codes=("bad_input",))
    data = policy.to_dict()
    assert data["retryable_codes"] == ["timeout", "http_503"]
    assert "breaker" not in data and data["breaker_open_s"] == 30
    assert RetryPolicy.from_mapping(json.loads(json.dumps(data))) == policy


def test_policy_change_takes_effect_through_overrides():
    policy = RetryPolicy()
    changed = policy.with_overrides({"max_attempts": 8, "breaker": {"open_s": 120}})
    assert changed.max_attempts == 8 and changed.breaker_open_s == 120
    assert policy.max_attempts == 5  # the original is untouched
    with pytest.raises(PolicyError) as info:
        policy.with_overrides({"base_delay_s": 500})  # now above max_delay_s 300
    assert info.value.field == "max_delay_s"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 101}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": "5"}, "max_attempts"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"max_attempts": None}, "max_attempts"),
        ({"base_delay_s": -1}, "base_delay_s"),
        ({"base_delay_s": "2"}, "base_delay_s"),
        ({"base_delay_s": float("nan")}, "base_delay_s"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"multiplier": 11}, "multiplier"),
        ({"max_delay_s": 8 * 86_400}, "max_delay_s"),
        ({"max_delay_s": 1, "base_delay_s": 2}, "max_delay_s"),
        ({"jitter": 1.5}, "jitter"),
        ({"jitter": -0.1}, "jitter"),
        ({"retryable_codes": "timeout"}, "retryable_codes"),
        ({"retryable_codes": ["ok", ""]}, "retryable_codes"),
        ({"non_retryable_codes": [3]}, "non_retryable_codes"),
        ({"retryable_codes": ["x"], "non_retryable_codes": ["x"]}, "non_retryable_codes"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"concurrency": 10_001}, "concurrency"),
        ({"queue_limit": 0}, "queue_limit"),
        ({"breaker_failure_threshold": 0}, "breaker_failure_threshold"),
        ({"breaker_open_s": 86_401}, "breaker_open_s"),
        ({"breaker_success_threshold": 1001}, "breaker_success_threshold"),
        ({"max_start_delay_s": 0}, "max_start_delay_s"),
        ({"deadline_s": -5}, "deadline_s"),
        ({"max_attemps": 3}, "max_attemps"),
        ({"breaker": {"open_s": 0}}, "breaker.open_s"),
        ({"breaker": {"threshold": 3}}, "breaker.threshold"),
        ({"breaker": 5}, "breaker"),
        ({"breaker_scope": "tenant"}, "breaker_scope"),
        ({"breaker": {"scope": None}}, "breaker.scope"),
        ({"sla": {"deadline_s": 0}}, "sla.deadline_s"),
        ({"breaker_open_s": 10, "breaker": {"open_s": 20}}, "breaker.open_s"),
    ],
)
def test_every_validation_error_names_its_field(data, field):
    with pytest.raises(PolicyError) as info:
        RetryPolicy.from_mapping(data)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert info.value.message


def test_error_message_says_what_to_fix():
    with pytest.raises(PolicyError) as info:
        RetryPolicy.from_mapping({"max_attempts": 0})
    assert info.value.message == "max_attempts must be an integer from 1 to 100, got 0"


def test_a_huge_refused_value_is_said_back_short():
    with pytest.raises(PolicyError) as info:
        RetryPolicy.from_mapping({"max_attempts": int("9" * 4000)})
    assert info.value.message == "max_attempts must be an integer from 1 to 100, got a 4000-digit number"
    with pytest.raises(PolicyError) as info:
        RetryPolicy.from_mapping({"max_attempts": "9" * 5000})
    assert info.value.message.endswith(f"got '{'9' * 39}…") and len(info.value.message) < 100


def test_nested_errors_speak_the_nested_names():
    with pytest.raises(PolicyError) as info:
        RetryPolicy.from_mapping({"sla": {"deadline_s": 1.5}})
    assert str(info.value) == "sla.deadline_s: sla.deadline_s must be an integer from 1 to 31536000, got 1.5"


def test_breaker_scope_defaults_to_the_handler_and_names_the_choices_when_wrong():
    assert RetryPolicy().breaker_scope == "handler"
    assert RetryPolicy.from_mapping({"breaker": {"scope": "handler_and_tenant"}}).breaker_scope == "handler_and_tenant"
    with pytest.raises(PolicyError) as info:
        RetryPolicy.from_mapping({"breaker": {"scope": "per-tenant"}})
    assert str(info.value) == ("breaker.scope: breaker.scope must be one of handler, handler_and_tenant, "
                               "got 'per-tenant'")


def test_non_mapping_is_rejected():
    with pytest.raises(PolicyError) as info:
        RetryPolicy.from_mapping(["max_attempts", 3])
    assert info.value.field == "policy"


def test_direct_construction_is_validated_too():
    with pytest.raises(PolicyError):
        RetryPolicy(jitter=2)


def test_a_code_over_80_characters_is_a_problem_to_save_but_still_loads():
    stored = {"retryable_codes": ["timeout", "x" * 81], "non_retryable_codes": ["y" * 80]}
    assert RetryPolicy.from_mapping(stored).retryable_codes == ("timeout", "x" * 81)  # an old version still runs
    [problem] = too_long_codes(stored)
    assert problem.field == "retryable_codes"
    assert problem.message == ("retryable_codes holds a code of 81 characters ('xxxxxxxxxxxxxxxxxxxx'…); an error "
                               "code is at most 80 characters, as a run records it")
    assert too_long_codes({"retryable_codes": "not a list", "non_retryable_codes": [5]}) == []  # said elsewhere


def test_backoff_follows_base_times_multiplier_power():
    policy = RetryPolicy(base_delay_s=2, multiplier=3, max_delay_s=10_000, jitter=0)
    assert [backoff_delay(policy, n) for n in range(1, 6)] == [2, 6, 18, 54, 162]


def test_backoff_is_capped_at_max_delay():
    policy = RetryPolicy(base_delay_s=2, multiplier=2, max_delay_s=30, jitter=0)
    assert [backoff_delay(policy, n) for n in range(1, 8)] == [2, 4, 8, 16, 30, 30, 30]


def test_jitter_bounds_hold_over_many_draws():
    policy = RetryPolicy(base_delay_s=10, multiplier=2, max_delay_s=100, jitter=0.25)
    rng = random.Random(1234)
    for attempt in (1, 2, 3):
        nominal = 10 * 2 ** (attempt - 1)
        draws = [backoff_delay(policy, attempt, rng.random) for _ in range(2000)]
        assert min(draws) >= nominal * 0.75 and max(draws) <= nominal * 1.25
        # The draws really spread over the window rather than sitting on the nominal value.
        assert min(draws) < nominal * 0.8 and max(draws) > nominal * 1.2


def test_jitter_never_exceeds_max_delay_and_still_spreads_at_the_cap():
    policy = RetryPolicy(base_delay_s=10, multiplier=2, max_delay_s=100, jitter=0.5)
    rng = random.Random(7)
    draws = [backoff_delay(policy, 10, rng.random) for _ in range(2000)]
    assert max(draws) <= 100 and min(draws) >= 50
    assert len({round(d, 3) for d in draws}) > 1000  # not piled up on the cap


def test_backoff_is_never_negative_and_zero_base_means_no_wait():
    assert backoff_delay(RetryPolicy(base_delay_s=0, jitter=1), 3, lambda: 0.0) == 0
    policy = RetryPolicy(jitter=1)
    assert backoff_delay(policy, 1, lambda: 0.0) == 0


@pytest.mark.parametrize("attempt", [1_000, 10**6, 10**30])
def test_huge_attempt_numbers_do_not_overflow(attempt):
    policy = RetryPolicy(multiplier=10, max_delay_s=300, jitter=0)
    assert backoff_delay(policy, attempt) == 300


def test_attempt_is_one_based():
    with pytest.raises(ValueError):
        backoff_delay(RetryPolicy(), 0)


def test_delay_bounds_gives_low_nominal_high():
    policy = RetryPolicy(base_delay_s=10, multiplier=2, max_delay_s=100, jitter=0.2)
    assert delay_bounds(policy, 1) == pytest.approx((8, 10, 12))
    assert delay_bounds(policy, 4) == pytest.approx((64, 80, 96))
    assert delay_bounds(policy, 5) == pytest.approx((80, 100, 100))


def test_retry_after_wins_over_backoff():
    policy = RetryPolicy(base_delay_s=2, jitter=0)
    assert retry_delay(policy, 1, retry_after_s=42) == 42
    assert retry_delay(policy, 1, retry_after_s=None) == 2
    assert retry_delay(policy, 1, retry_after_s=-3) == 0


def test_retry_schedule_lists_each_retry_with_running_totals():
    policy = RetryPolicy(max_attempts=4, base_delay_s=10, multiplier=2, max_delay_s=30, jitter=0.1)
    rows = retry_schedule(policy)
    assert [row["attempt"] for row in rows] == [1, 2, 3]
    assert [row["next_attempt"] for row in rows] == [2, 3, 4]
    assert [row["nominal_s"] for row in rows] == [10, 20, 30]
    assert [row["cumulative_nominal_s"] for row in rows] == [10, 30, 60]
    assert rows[-1]["cumulative_low_s"] == pytest.approx(54)
    assert rows[-1]["cumulative_high_s"] == pytest.approx(11 + 22 + 30)  # the last one clipped to the cap
    json.dumps(rows)


def test_single_attempt_policy_has_empty_schedule():
    assert retry_schedule(RetryPolicy(max_attempts=1)) == []


def test_a_code_that_hides_a_character_is_a_problem_to_save():
    """"card_declined\u200b" reads as card_declined on every page and matches no error raised with it (helper 155)."""
    [problem] = too_long_codes({"retryable_codes": ["ok", "card_declined\u200b"]})
    assert (problem.field, problem.message) == ("retryable_codes", "retryable_codes must not contain invisible "
                                                "characters or spaces other than a plain one; it holds U+200B (zero "
                                                "width space) at position 14")
    assert too_long_codes({"retryable_codes": [" timeout "]}) == []  # stripped when saved, as before
