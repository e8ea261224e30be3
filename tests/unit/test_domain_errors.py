import pickle

import pytest

from console.domain.errors import (
    CompensableError,
    Failure,
    HandlerError,
    HandlerTimeout,
    NonRetryableError,
    RetryableError,
    classify,
    classify_reported,
    fingerprint,
    normalise_message,
    shown_message,
)
from console.domain.policy import RetryPolicy
from console.domain.secrets import holding

POLICY = RetryPolicy()


def test_error_types_carry_code_and_message():
    exc = RetryableError("http_503", "upstream busy", retry_after_s=30)
    assert (exc.code, exc.message, exc.retry_after_s) == ("http_503", "upstream busy", 30)
    assert str(exc) == "http_503: upstream busy"
    assert isinstance(exc, HandlerError)
    assert RetryableError().code == "retryable"
    assert NonRetryableError().code == "non_retryable"
    assert CompensableError().code == "compensable"
    assert HandlerTimeout(message="took 301 s").code == "timeout"
    assert isinstance(HandlerTimeout(), RetryableError)


def test_error_types_survive_pickling():
    for exc in (
        RetryableError("http_503", "busy", retry_after_s=5),
        CompensableError("stock", "oversold", severity=2),
        NonRetryableError(message="bad input"),
    ):
        copy = pickle.loads(pickle.dumps(exc))
        assert type(copy) is type(exc) and copy.__dict__ == exc.__dict__


@pytest.mark.parametrize("severity", [0, 4, True, "2"])
def test_compensable_severity_must_be_one_to_three(severity):
    with pytest.raises(ValueError, match="severity"):
        CompensableError(severity=severity)


def test_retry_after_must_be_non_negative():
    with pytest.raises(ValueError, match="retry_after_s"):
        RetryableError(retry_after_s=-1)


def test_classify_retryable_keeps_retry_after():
    failure = classify(RetryableError("http_429", "slow down", retry_after_s=12.5), POLICY)
    assert failure == Failure("http_429", "slow down", retryable=True, retry_after_s=12.5)


def test_classify_timeout_is_retryable():
    failure = classify(HandlerTimeout(message="ran 300 s"), POLICY)
    assert failure.code == "timeout" and failure.retryable


def test_classify_non_retryable():
    failure = classify(NonRetryableError("bad_input", "amount must be positive"), POLICY)
    assert not failure.retryable and not failure.compensable and failure.severity is None


def test_classify_compensable_carries_severity():
    failure = classify(CompensableError("stock", "oversold", severity=3), POLICY)
    assert (failure.retryable, failure.compensable, failure.severity) == (False, True, 3)


def test_unexpected_exception_is_retried_under_its_class_name():
    failure = classify(KeyError("tenant"), POLICY)
    assert failure.code == "KeyError" and failure.retryable
    assert failure.message == "'tenant'"


def test_policy_lists_win_over_the_type():
    policy = RetryPolicy(non_retryable_codes=("KeyError", "http_503"), retryable_codes=("bad_input",))
    assert not classify(KeyError("x"), policy).retryable
    assert not classify(RetryableError("http_503"), policy).retryable
    assert classify(NonRetryableError("bad_input"), policy).retryable


def test_message_is_truncated():
    failure = classify(ValueError("x" * 5000), POLICY)
    assert len(failure.message) == 2000


def test_classify_reported_uses_the_flag_unless_the_policy_lists_the_code():
    assert not classify_reported("E42", "boom", False, POLICY).retryable
    assert classify_reported("E42", "boom", True, POLICY).retryable
    assert classify_reported("E42", "boom", None, POLICY).retryable
    policy = RetryPolicy(non_retryable_codes=("E42",), retryable_codes=("E7",))
    assert not classify_reported("E42", "boom", True, policy).retryable
    assert classify_reported("E7", "boom", False, policy).retryable
    assert classify_reported("", "", True, POLICY).code == "unknown"
    assert classify_reported("E" * 300, "boom", True, POLICY).code == "E" * 80  # the column's length


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Order 12345 failed", "order <n> failed"),
        ("run 550e8400-e29b-41d4-a716-446655440000 lost", "run <uuid> lost"),
        ("job_3f9a2c7d1e stuck", "job_<hex> stuck"),
        ("pointer 0xDEADBEEF", "pointer <hex>"),
        ("at 2026-01-05T09:00:00.123+08:00 too late", "at <ts> too late"),
        ("user 'alice' not found", "user <str> not found"),
        ('field "amount" invalid', "field <str> invalid"),
        ("mail to ops@example.com bounced", "mail to <email> bounced"),
        ("can't   reach\n host", "can't reach host"),
        ("deadbeef is a word", "deadbeef is a word"),
    ],
)
def test_normalise_message_replaces_variable_parts(message, expected):
    assert normalise_message(message) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("VAT id DE902 invalid", "VAT id DE<n> invalid"),
        ("Order 12345 failed", "Order <n> failed"),
        ("pointer 0xDEADBEEF", "pointer <hex>"),
        ("job_3F9A2C7D1E stuck", "job_<hex> stuck"),
        ("at 2026-01-05T09:00:00Z too late", "at <ts> too late"),
        ("run 550E8400-E29B-41D4-A716-446655440000 lost", "run <uuid> lost"),
    ],
)
def test_a_message_shown_to_people_keeps_its_case_with_the_same_placeholders(message, expected):
    # A group's title read "vat id de<n> invalid": the lower case is the fingerprint's, not the error's.
    assert shown_message(message) == expected
    assert shown_message(message).lower() == normalise_message(message)


def test_letters_naming_different_orders_share_one_group_when_the_id_is_quoted():
    """As the README tells a handler's author: an id with letters in it is a word unless quoted. Masking any word
    mixing letters and digits merged different outages (redis01 and postgres01 refusing connections; helper 147)."""
    quoted = [f"card declined for order '{order}'" for order in ("ord_Kx9QmZ", "ord_PwRtYa", "ord_Ab12Cd34")]
    assert len({fingerprint("card_declined", message) for message in quoted}) == 1
    hosts = ("could not connect to redis01:6379", "could not connect to postgres01:5432")
    assert len({fingerprint("connection_refused", message) for message in hosts}) == 2


def test_normalised_message_is_cut_to_200_chars():
    assert len(normalise_message("word " * 100)) == 200


def test_fingerprint_groups_messages_differing_only_in_ids_and_numbers():
    first = fingerprint("http_503", "Order 1001 for bob@x.com failed after 3 tries (req 7f3a9b2c1d)")
    second = fingerprint("http_503", "order 2002 for eve@y.org failed after 5 tries (req 0a1b2c3d4e5f)")
    assert first == second
    assert len(first) == 16 and int(first, 16) >= 0


def test_fingerprint_separates_different_codes_and_messages():
    assert fingerprint("http_503", "upstream down") != fingerprint("http_504", "upstream down")
    assert fingerprint("http_503", "upstream down") != fingerprint("http_503", "disk full")


def test_failure_exposes_its_fingerprint():
    failure = classify(RetryableError("http_503", "order 7 failed"), POLICY)
    assert failure.fingerprint == fingerprint("http_503", "order 99 failed")


def test_a_failures_message_is_masked_as_the_logs_are():
    # Shown on the run, the DLQ and the API, and kept: a credential a handler put in its message must not be.
    failure = classify(RetryableError("auth", "Authorization: Bearer sk_live_SECRETKEY123 failed"), POLICY)
    assert "SECRETKEY" not in failure.message and failure.message.startswith("Authorization: ***")
    reported = classify_reported("auth", "token=abc123def456 refused", False, POLICY)
    assert reported.message == "token=*** refused"


def test_a_runbooks_failure_is_masked_on_its_execution_too():
    from console.services.recovery.runbook_runner import _describe

    assert _describe(RuntimeError("boom password=hunter2-SECRET")) == "RuntimeError: boom password=***"


def test_a_code_that_is_a_secret_param_is_masked_as_the_message_is():
    """A handler using its token as its error code showed it to every viewer on the run, the DLQ and the API, while
    the params read *** (helper 127)."""
    with holding(("tok_zzSecretVal42",)):
        failure = classify(NonRetryableError("tok_zzSecretVal42", "refused tok_zzSecretVal42"), POLICY)
    assert (failure.code, failure.message) == ("***", "refused ***")
    with holding(("tok_zzSecretVal42",)):  # an executor's report, the same
        assert classify_reported("tok_zzSecretVal42", "x", False, POLICY).code == "***"
    assert classify(NonRetryableError("bad_account", "closed"), POLICY).code == "bad_account"
