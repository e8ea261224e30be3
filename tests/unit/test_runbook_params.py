"""A runbook's declared parameters: raw input from a form, JSON or `k=v` becomes typed values, or field errors."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from console.domain.runbooks import Param, ParamErrors, Risk, dump, needs_approval, parse
from console.domain.runbooks import ParamType as T

DECLARED = (
    Param("note", T.STR, required=True, max_length=10),
    Param("count", T.INT, default=5, minimum=1, maximum=100),
    Param("rate", T.FLOAT, default=1.5, minimum=0.5),
    Param("merge", T.BOOL, default=True),
    Param("age", T.CHOICE, default="any", choices=("any", "1h", "7d")),
    Param("since", T.DATETIME),
    Param("run", T.RUN),
    Param("letters", T.DEAD_LETTER, many=True),
    Param("task", T.TASK),
)


def errors_of(raw: dict) -> dict:
    with pytest.raises(ParamErrors) as raised:
        parse(DECLARED, raw)
    return raised.value.errors


def test_defaults_fill_in_what_is_not_given():
    assert parse(DECLARED, {"note": "hi"}) == {"note": "hi", "count": 5, "rate": 1.5, "merge": True, "age": "any",
                                               "since": None, "run": None, "letters": None, "task": None}


def test_text_from_a_form_or_the_cli_becomes_each_type():
    values = parse(DECLARED, {"note": " why ", "count": "42", "rate": "2", "merge": "off", "age": "7d",
                              "since": "2026-01-31T02:30", "run": "#12", "letters": "3, 4 4 5", "task": "9"})
    assert values == {"note": "why", "count": 42, "rate": 2.0, "merge": False, "age": "7d",
                      "since": datetime(2026, 1, 31, 2, 30, tzinfo=UTC), "run": 12, "letters": [3, 4, 5], "task": 9}


def test_json_values_are_taken_as_they_are():
    values = parse(DECLARED, {"note": "x", "count": 7, "rate": 3, "merge": False, "letters": [1, "2"], "run": 4})
    assert (values["count"], values["rate"], values["merge"], values["letters"], values["run"]) == (7, 3.0, False,
                                                                                                    [1, 2], 4)


def test_a_moment_with_an_offset_is_turned_into_utc_and_a_date_alone_is_midnight():
    berlin = timezone(timedelta(hours=1))
    assert parse(DECLARED, {"note": "x", "since": "2026-01-31T03:30+01:00"})["since"] == datetime(
        2026, 1, 31, 2, 30, tzinfo=UTC)
    assert parse(DECLARED, {"note": "x", "since": datetime(2026, 1, 31, 3, 30, tzinfo=berlin)})["since"].hour == 2
    assert parse(DECLARED, {"note": "x", "since": "2026-01-31"})["since"] == datetime(2026, 1, 31, tzinfo=UTC)


def test_every_bad_field_is_named_with_what_to_fix():
    errors = errors_of({"count": "lots", "rate": "0.1", "merge": "maybe", "age": "1y", "since": "yesterday",
                        "run": "-3", "letters": "1,x", "task": True, "colour": "red"})
    assert errors == {
        "colour": "unknown parameter; this runbook takes note, count, rate, merge, age, since, run, letters, task",
        "note": "required", "count": "a whole number", "rate": "at least 0.5", "merge": "true or false",
        "age": "one of any, 1h, 7d", "since": "a date and time like 2026-01-31T02:30 (UTC unless it has an offset)",
        "run": "an id (a whole number from 1 to 2,147,483,647)", "letters": "an id (a whole number)",
        "task": "an id (a whole number)"}


@pytest.mark.parametrize(("raw", "field", "message"), [
    ({"note": "x" * 11}, "note", "at most 10 characters"),
    ({"note": 5}, "note", "must be text"),
    ({"note": "x", "count": 101}, "count", "at most 100"),
    ({"note": "x", "count": 2.5}, "count", "a whole number"),
    ({"note": "x", "count": True}, "count", "a whole number"),
    ({"note": "x", "rate": "nan"}, "rate", "a finite number"),
    # JSON numbers past what a field takes (an int past a float's range was a 500; any int was kept as sent).
    ({"note": "x", "rate": 10**400}, "rate", "a finite number"),
    ({"note": "x", "count": 10**400}, "count", "at most 100"),
    ({"note": "x", "letters": ",".join(str(n) for n in range(1, 502))}, "letters", "at most 500 ids at once"),
    ({"note": "   "}, "note", "required"),
    # Digits no row's id can have: said as the range, not as "not a whole number".
    ({"note": "x", "run": "9" * 30}, "run", "an id (a whole number from 1 to 2,147,483,647)"),
    ({"note": "x", "run": 2**31}, "run", "an id (a whole number from 1 to 2,147,483,647)"),
    ({"note": "x", "letters": f"1, {'9' * 25}"}, "letters", "an id (a whole number from 1 to 2,147,483,647)"),
    # A moment far outside what anything is scheduled for (a backfill from year 1 overflowed in its job).
    ({"note": "x", "since": "0001-01-01T00:00"}, "since", "a date and time between the years 1970 and 9998"),
    ({"note": "x", "since": "9999-12-31"}, "since", "a date and time between the years 1970 and 9998"),
])
def test_out_of_range_and_wrong_kinds_are_refused(raw, field, message):
    assert errors_of(raw)[field] == message


@pytest.mark.parametrize("huge", [10**18, -(10**19), 1e300, 10**400],
                         ids=["1e18", "-1e19", "1e300", "400 digits"])
def test_a_whole_number_without_a_maximum_is_held_to_18_digits_as_text_is(huge):
    """A JSON `limit` of 400 digits ran a runbook and stayed in its execution's params; as text it was refused."""
    with pytest.raises(ParamErrors) as raised:
        parse((Param("limit", T.INT),), {"limit": huge})
    assert raised.value.errors == {"limit": "a whole number of at most 18 digits"}
    assert parse((Param("limit", T.INT),), {"limit": 10**18 - 1}) == {"limit": 10**18 - 1}


def test_text_is_read_as_a_json_number_would_be():
    """The CLI said "a whole number" of `limit=99999999999999999999999999999` where the API and the form said "at most
    50", and refused `limit=5.0` that the API took as JSON 5.0 (helper 125)."""
    assert errors_of({"note": "x", "count": "9" * 29})["count"] == "at most 100"
    assert parse(DECLARED, {"note": "x", "count": "5.0"})["count"] == parse(DECLARED, {"note": "x", "count": 5.0})[
        "count"] == 5
    assert errors_of({"note": "x", "count": "5.5"})["count"] == errors_of({"note": "x", "count": 5.5})["count"] == (
        "a whole number")
    with pytest.raises(ParamErrors) as raised:
        parse((Param("limit", T.INT),), {"limit": "9" * 30})
    assert raised.value.errors == {"limit": "a whole number of at most 18 digits"}
    assert errors_of({"note": "x", "count": "9" * 5000})["count"] == "a whole number"  # no one's number
    # An exponent, as JSON's 1e3 (helper 128); one past any number's size is refused, not computed.
    assert parse(DECLARED, {"note": "x", "count": "1e1"})["count"] == parse(DECLARED, {"note": "x", "count": 1e1})[
        "count"] == 10
    assert errors_of({"note": "x", "count": "1e999999999"})["count"] == "a whole number"
    assert errors_of({"note": "x", "count": "2.5e0"})["count"] == "a whole number"


def test_params_must_be_an_object():
    with pytest.raises(ParamErrors) as raised:
        parse(DECLARED, ["note"])
    assert raised.value.errors == {"params": "params must be an object of name: value"}


def test_dump_stores_moments_as_text_that_parse_reads_back():
    values = parse(DECLARED, {"note": "x", "since": "2026-01-31T02:30"})
    stored = dump(DECLARED, values)
    assert stored["since"] == "2026-01-31T02:30:00+00:00"
    assert parse(DECLARED, stored) == values


def test_a_declaration_that_contradicts_itself_fails_at_import():
    with pytest.raises(ValueError, match="choice"):
        Param("age", T.CHOICE)
    with pytest.raises(ValueError, match="many"):
        Param("count", T.INT, many=True)
    with pytest.raises(ValueError):
        Param("count", T.INT, default="five")
    with pytest.raises(ValueError, match="name"):
        Param("Bad-Name", T.STR)
    with pytest.raises(ValueError, match="'n': 2 to 60 lower-case letters"):  # the length was not said (helper 120)
        Param("n", T.INT)


def test_high_risk_always_needs_approval_and_an_admin_can_ask_for_it_on_any():
    assert needs_approval(Risk.HIGH, False) and needs_approval("high", False)
    assert not needs_approval(Risk.LOW, False) and not needs_approval(Risk.MEDIUM, False)
    assert needs_approval(Risk.LOW, True)
