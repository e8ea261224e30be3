import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from console.domain.cron import CronError, describe, load_zone, parse, wall_to_utc

BERLIN, NEW_YORK = ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def between(expression: str, timezone: str, start: datetime, end: datetime) -> list[datetime]:
    return list(parse(expression, timezone).fires_between(start, end))


# --- generated comparison against croniter -----------------------------------------------------------------

# (low, high, names) per field; names are used for values that have one.
_SPECS = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, ("", "jan", "FEB", "Mar", "apr", "MAY", "jun", "Jul", "aug", "SEP", "oct", "Nov", "dec")),
    (0, 7, ("sun", "MON", "Tue", "wed", "THU", "fri", "Sat")),
)


def _token(rng: random.Random, value: int, names: tuple) -> str:
    return names[value] if value < len(names) and names[value] and rng.random() < 0.3 else str(value)


def _random_item(rng: random.Random, low: int, high: int, names: tuple) -> str:
    roll = rng.random()
    if roll < 0.1:
        return "*"
    if roll < 0.25:
        return f"*/{rng.randint(2, (high - low) // 2 + 1)}"
    first = rng.randint(low, high)
    if roll < 0.55 or first == high:
        return _token(rng, first, names)
    # croniter mis-expands the degenerate range 7-7, and a range always has last > first here.
    last = rng.randint(first + 1, high)
    span = f"{_token(rng, first, names)}-{_token(rng, last, names)}"
    return span if roll < 0.8 else f"{span}/{rng.randint(1, 4)}"


def _random_expression(rng: random.Random) -> str:
    fields = []
    for low, high, names in _SPECS:
        items = [_random_item(rng, low, high, names) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
        fields.append("*" if "*" in items else ",".join(items))
    return " ".join(fields)


def _croniter_reads_differently(schedule) -> bool:
    # croniter (7.x, default day_or=True) ORs the two day fields like we do, except that it collapses a day
    # field whose values cover the whole range to `*` when the *other* field's text contains a `*`, and then
    # ANDs: "1-31" with "*/2", or "*/3" with "0-6". We keep a field restricted unless it is literally `*`,
    # the rule the scheduler documents, and test_both_day_fields_restricted_fire_on_either pins it down.
    dom, dow = schedule.expression.split()[2], schedule.expression.split()[4]
    full_dom = len(schedule.days) == 31 and dom != "*" and "*" in dow
    full_dow = len(schedule.weekdays) == 7 and dow != "*" and "*" in dom
    return full_dom or full_dow


def test_generated_expressions_agree_with_croniter():
    rng = random.Random(20260329)
    # Berlin starts sit far from its transitions; below, any run that still crosses one is not compared,
    # because croniter's DST handling differs from ours by design (it skips nonexistent times).
    zones_and_starts = {
        "UTC": [utc(2026, 1, 5, 9, 0), utc(2026, 6, 30, 23, 59, 30), utc(2028, 2, 28, 12, 17, 5)],
        "Asia/Kolkata": [utc(2026, 3, 8, 6, 30), utc(2026, 12, 31, 18, 29, 59)],
        "Europe/Berlin": [utc(2026, 1, 10, 0, 0), utc(2026, 7, 1, 21, 45, 10)],
    }
    compared = skipped_unsatisfiable = skipped_day_rule = skipped_dst = 0
    for _ in range(300):
        expression = _random_expression(rng)
        try:
            schedule = parse(expression)
        except CronError as exc:
            # Only "31 in February"-style day sets are refused; croniter would search for them for 50 years.
            assert "never occurs" in exc.message, (expression, exc)
            skipped_unsatisfiable += 1
            continue
        if _croniter_reads_differently(schedule):
            skipped_day_rule += 1
            continue
        for timezone, starts in zones_and_starts.items():
            zone = ZoneInfo(timezone)
            schedule = parse(expression, timezone)
            for start in starts:
                ours = schedule.next_n(start, 5)
                reference = croniter(expression, start.astimezone(zone))
                theirs = [reference.get_next(datetime) for _ in range(5)]
                offsets = {moment.utcoffset() for moment in [start.astimezone(zone), *ours, *theirs]}
                # One offset throughout, and too short a span to leave summer time and come back to it.
                if len(offsets) > 1 or (timezone == "Europe/Berlin" and ours[-1] - start > timedelta(days=150)):
                    skipped_dst += 1
                    continue
                assert ours == theirs, (expression, timezone, start)
                assert [moment.utcoffset() for moment in ours] == [moment.utcoffset() for moment in theirs]
                compared += 1
    assert compared > 1700, (compared, skipped_unsatisfiable, skipped_day_rule, skipped_dst)
    assert skipped_day_rule + skipped_unsatisfiable < 30


def test_both_day_fields_restricted_fire_on_either():
    # 2026-01-02 is a Friday; the 13th is a Tuesday.
    fired = between("0 0 13 * 5", "UTC", utc(2026, 1, 1), utc(2026, 1, 31))
    assert [moment.day for moment in fired] == [2, 9, 13, 16, 23, 30]
    # A full-range field that is not literally `*` still counts as restricted, so every day matches.
    assert len(between("0 0 1-31 * */2", "UTC", utc(2026, 1, 1), utc(2026, 1, 31))) == 30


def test_one_day_field_restricted_is_the_only_rule():
    assert [m.day for m in between("0 0 13 * *", "UTC", utc(2026, 1, 1), utc(2026, 3, 1))] == [13, 13]
    assert {m.weekday() for m in between("0 0 * * 5", "UTC", utc(2026, 1, 1), utc(2026, 3, 1))} == {4}


# --- DST ---------------------------------------------------------------------------------------------------


def test_spring_forward_fires_once_at_the_end_of_the_gap_berlin():
    fired = between("30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12), utc(2026, 3, 30, 12))
    # 02:30 does not exist on 2026-03-29: it fires at 03:00 CEST = 01:00 UTC, and the day is not skipped.
    assert fired == [utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)]
    local = parse("30 2 * * *", "Europe/Berlin").next_n(utc(2026, 3, 28, 12), 2)
    assert [moment.isoformat() for moment in local] == ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]


def test_spring_forward_new_york_does_not_double_fire_interval_schedules():
    fired = between("*/15 * * * *", "America/New_York", utc(2026, 3, 8, 6, 20), utc(2026, 3, 8, 7, 30))
    # 01:30 EST .. 01:45 EST, then the skipped 02:xx all collapse onto 03:00 EDT (07:00 UTC).
    assert fired == [utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 6, 45), *(utc(2026, 3, 8, 7, m) for m in (0, 15, 30))]
    assert between("0,30 2-3 * * *", "America/New_York", utc(2026, 3, 8), utc(2026, 3, 8, 8)) == [
        utc(2026, 3, 8, 7, 0),
        utc(2026, 3, 8, 7, 30),
    ]


def test_fall_back_fixed_time_fires_once_at_first_occurrence():
    fired = between("30 1 * * *", "America/New_York", utc(2026, 10, 31, 12), utc(2026, 11, 2, 12))
    assert fired == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]


def test_fall_back_hourly_fires_at_every_real_hour():
    fired = between("0 * * * *", "America/New_York", utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 7, 30))
    # 05:00 UTC is 01:00 EDT and 06:00 UTC is 01:00 EST: the same wall time, two real hours.
    assert fired == [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)]
    schedule = parse("0 * * * *", "America/New_York")
    # From inside the first pass, the next hour is the second 01:00, not 02:00.
    assert schedule.next_after(utc(2026, 11, 1, 5, 15)) == utc(2026, 11, 1, 6)
    assert schedule.next_after(utc(2026, 11, 1, 6, 15)) == utc(2026, 11, 1, 7)


def test_fall_back_wildcard_minutes_run_in_both_passes_in_order():
    local = parse("*/30 1 * * *", "America/New_York").next_n(utc(2026, 11, 1, 4), 4)
    assert [moment.isoformat() for moment in local] == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00",
    ]


@pytest.mark.parametrize(
    ("timezone", "start"),
    [("Europe/Berlin", utc(2026, 3, 26)), ("Europe/Berlin", utc(2026, 10, 22)), ("America/New_York", utc(2026, 3, 5))],
)
def test_fixed_local_time_keeps_its_wall_clock_across_transitions(timezone, start):
    local = parse("0 3 * * *", timezone).next_n(start, 7)
    assert {(moment.hour, moment.minute) for moment in local} == {(3, 0)}
    assert len({moment.utcoffset() for moment in local}) == 2
    # Same-zone subtraction is wall-clock arithmetic; real gaps show the one 23- or 25-hour day.
    real = [moment.astimezone(UTC) for moment in local]
    gaps = [later - earlier for earlier, later in zip(real, real[1:], strict=False)]
    assert gaps.count(timedelta(hours=24)) == 5 and len({*gaps} - {timedelta(hours=24)}) == 1


def test_fixed_local_time_across_new_york_fall_back():
    fired = between("0 3 * * *", "America/New_York", utc(2026, 10, 31), utc(2026, 11, 3))
    assert fired == [utc(2026, 10, 31, 7), utc(2026, 11, 1, 8), utc(2026, 11, 2, 8)]


def _brute_force(schedule, minutes: list[tuple[datetime, datetime]]) -> list[datetime]:
    # The documented rule, checked one real minute at a time: a matching wall time fires at its first pass
    # (both passes when the schedule is wild), and matching wall times the clock skipped fire at the gap's end
    # (none when the schedule is wild: an interval goes on from the gap's end, as Vixie cron's does).
    def matches(wall: datetime) -> bool:
        in_month, in_week = wall.day in schedule.days, (wall.weekday() + 1) % 7 in schedule.weekdays
        day = (in_month and in_week) if schedule.days_any or schedule.weekdays_any else (in_month or in_week)
        return day and wall.month in schedule.months and wall.hour in schedule.hours and wall.minute in schedule.minutes

    fired = []
    for (_, before), (instant, local) in zip(minutes, minutes[1:], strict=False):
        wall, previous = local.replace(tzinfo=None), before.replace(tzinfo=None)
        skipped = (previous + timedelta(minutes=step) for step in range(1, (wall - previous) // timedelta(minutes=1)))
        if (matches(wall) and (local.fold == 0 or schedule.wild)) or (
                not schedule.wild and any(map(matches, skipped))):
            fired.append(instant)
    return fired


@pytest.mark.parametrize(
    ("timezone", "day"),
    [
        ("America/New_York", datetime(2026, 3, 8)),
        ("America/New_York", datetime(2026, 11, 1)),
        ("Europe/Berlin", datetime(2026, 3, 29)),
        ("Europe/Berlin", datetime(2026, 10, 25)),
        ("Australia/Lord_Howe", datetime(2026, 4, 5)),  # clocks move by 30 minutes here
        ("Australia/Lord_Howe", datetime(2026, 10, 4)),
    ],
)
def test_generated_expressions_match_a_minute_by_minute_reading_across_transitions(timezone, day):
    rng = random.Random(f"{timezone}{day}")
    start = day.replace(tzinfo=UTC) - timedelta(hours=14)
    utc_minutes = [start + timedelta(minutes=step) for step in range(36 * 60)]
    minutes = [(instant, instant.astimezone(ZoneInfo(timezone))) for instant in utc_minutes]
    for _ in range(15):
        minute, hour, _, _, weekday = _random_expression(rng).split()
        expression = f"{minute} {rng.choice([hour, '*', '0-3', '1,2', '*/2', '2'])} * * {rng.choice([weekday, '*'])}"
        schedule = parse(expression, timezone)
        assert list(schedule.fires_between(start, utc_minutes[-1], 5000)) == _brute_force(schedule, minutes), expression


def test_an_interval_skips_the_wall_times_a_spring_forward_removes():
    # "30 * * * *" fired at 00:30 GMT, then 02:00 and 02:30 BST: two runs 30 minutes apart (helper 106).
    night = datetime(2027, 3, 27, 23, 0, tzinfo=UTC)
    assert [t.isoformat() for t in parse("30 * 28 3 *", "Europe/London").next_n(night, 3)] == [
        "2027-03-28T00:30:00+00:00", "2027-03-28T02:30:00+01:00", "2027-03-28T03:30:00+01:00"]
    assert [t.isoformat() for t in parse("*/20 * 28 3 *", "Europe/London").next_n(night, 4)][2:] == [
        "2027-03-28T00:40:00+00:00", "2027-03-28T02:00:00+01:00"]
    # A fixed time the clocks skip still fires once, at the gap's end.
    assert parse("30 1 28 3 *", "Europe/London").next_n(night, 1)[0].isoformat() == "2027-03-28T02:00:00+01:00"


def test_wall_to_utc_maps_gap_to_its_end_and_fold_to_first():
    assert wall_to_utc(datetime(2026, 3, 8, 2, 30), NEW_YORK) == utc(2026, 3, 8, 7)
    assert wall_to_utc(datetime(2026, 11, 1, 1, 30), NEW_YORK) == utc(2026, 11, 1, 5, 30)
    assert wall_to_utc(datetime(2026, 3, 29, 2, 0), BERLIN) == utc(2026, 3, 29, 1)


# --- parsing -----------------------------------------------------------------------------------------------


def test_sunday_is_zero_and_seven():
    assert parse("0 0 * * 0").weekdays == parse("0 0 * * 7").weekdays == parse("0 0 * * sun").weekdays == {0}
    assert parse("0 0 * * 5-7").weekdays == {5, 6, 0}
    assert parse("0 0 * * 7").next_after(utc(2026, 1, 5)) == utc(2026, 1, 11)  # a Sunday


def test_names_are_case_insensitive_and_mix_with_numbers():
    named = parse("0 9 * jan-MAR,Dec mon-fri")
    assert named.months == {1, 2, 3, 12} and named.weekdays == {1, 2, 3, 4, 5}
    assert parse("0 9 * 1-3,12 1-5").next_n(utc(2026, 1, 1), 5) == named.next_n(utc(2026, 1, 1), 5)


def test_ranges_steps_and_lists():
    assert parse("*/15 * * * *").minutes == {0, 15, 30, 45}
    assert parse("10-30/10 * * * *").minutes == {10, 20, 30}
    assert parse("50/5 * * * *").minutes == {50, 55}
    assert parse("0 1,5,9-11 * * *").hours == {1, 5, 9, 10, 11}
    # An open-ended step in day-of-week stops at Saturday, like croniter; a-7/n reaches Sunday.
    assert parse("0 0 * * 1/2").weekdays == {1, 3, 5}
    assert parse("0 0 * * 1-7/2").weekdays == {1, 3, 5, 0}


@pytest.mark.parametrize(
    ("alias", "expanded"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@ANNUALLY", "0 0 1 1 *"),
    ],
)
def test_aliases_expand_to_their_five_fields(alias, expanded):
    start = utc(2026, 2, 3, 4, 5)
    assert parse(alias, "Europe/Berlin").next_n(start, 3) == parse(expanded, "Europe/Berlin").next_n(start, 3)
    assert parse(alias).expression == alias


@pytest.mark.parametrize(
    ("expression", "timezone", "field", "message"),
    [
        ("0 25 * * *", "UTC", "cron", "field 2 (hour) value 25 is out of range 0-23"),
        ("60 * * * *", "UTC", "cron", "field 1 (minute) value 60 is out of range 0-59"),
        ("0 0 * * 8", "UTC", "cron", "field 5 (day-of-week) value 8 is out of range 0-7"),
        ("0 0 0 * *", "UTC", "cron", "field 3 (day-of-month) value 0 is out of range 1-31"),
        ("", "UTC", "cron", "expression is empty"),
        ("   ", "UTC", "cron", "expression is empty"),
        (
            "0 0 * * * *",
            "UTC",
            "cron",
            "expected 5 fields (minute hour day-of-month month day-of-week), got 6; seconds",
        ),
        ("0 0 *", "UTC", "cron", "expected 5 fields"),
        ("@reboot", "UTC", "cron", "@reboot fires at daemon start"),
        ("@fortnightly", "UTC", "cron", "unknown alias '@fortnightly'; use one of @hourly"),
        ("*/0 * * * *", "UTC", "cron", "field 1 (minute) step '0' in '*/0' must be a whole number of at least 1"),
        ("*/ * * * *", "UTC", "cron", "step '' in '*/' must be"),
        ("5-1 * * * *", "UTC", "cron", "range 5-1 runs backwards; split it, e.g. 5-59,0-1"),
        ("0 0 * FOO *", "UTC", "cron", "field 4 (month) value 'FOO' is not a number or a name like JAN"),
        ("0 0 LW * *", "UTC", "cron", "Quartz"),  # L alone is the last day; its Quartz kin are refused
        ("0 0 L-3 * *", "UTC", "cron", "Quartz"),
        ("0 0 * * L", "UTC", "cron", "Quartz"),  # in day-of-month only
        ("0 0 ? * MON", "UTC", "cron", "Quartz"),
        ("0 0 * * MON#2", "UTC", "cron", "Quartz"),
        ("1,,2 * * * *", "UTC", "cron", "field 1 (minute) has ''"),
        ("0 0 30 2 *", "UTC", "cron", "day-of-month 30 never occurs in FEB"),
        ("0 0 31 4,6 *", "UTC", "cron", "never occurs in APR, JUN"),
        (
            "0 0 * * *",
            "Europe/Pariss",
            "timezone",
            "unknown IANA time zone 'Europe/Pariss'; did you mean 'Europe/Paris'?",
        ),
        ("0 0 * * *", "europe/berlin", "timezone", "did you mean 'Europe/Berlin'?"),
        ("0 0 * * *", "", "timezone", "unknown IANA time zone ''"),
        ("0 0 * * *", "../etc/passwd", "timezone", "unknown IANA time zone"),
    ],
)
def test_invalid_input_names_the_field_and_the_fix(expression, timezone, field, message):
    with pytest.raises(CronError) as caught:
        parse(expression, timezone)
    assert caught.value.field == field
    assert message in caught.value.message
    assert str(caught.value).startswith(f"{field}: ")


def test_l_is_the_last_day_of_each_month_on_the_task_s_wall_clock():
    """Month-end work (billing, exports) needed 28-31 and a check in the handler: L fires once, on the last day."""
    schedule = parse("0 23 L * *", "Europe/Berlin")
    fired = [moment.strftime("%Y-%m-%d %H:%M %z") for moment in schedule.next_n(utc(2027, 12, 15), 4)]
    assert fired == ["2027-12-31 23:00 +0100", "2028-01-31 23:00 +0100", "2028-02-29 23:00 +0100",  # a leap year
                     "2028-03-31 23:00 +0200"]  # after the spring change, still 23:00 local
    assert parse("0 0 l 2 *").next_after(utc(2029, 1, 1)) == utc(2029, 2, 28)  # lower case, and only February
    assert [m.day for m in parse("0 0 15,L * *").next_n(utc(2027, 4, 1), 3)] == [15, 30, 15]
    # With a weekday too, either day fires (cron's OR), as for any restricted day-of-month.
    assert [m.day for m in parse("0 0 L * MON").next_n(utc(2027, 2, 20), 3)] == [22, 28, 1]


@pytest.mark.parametrize("expression", ["0 0 L * *", "30 4 1,L * *", "0 12 L 2,6 *", "15 6 L * 5"])
def test_l_fires_where_croniter_says(expression):
    start = utc(2027, 1, 1)
    theirs = croniter(expression, start)
    assert parse(expression).next_n(start, 24) == [theirs.get_next(datetime) for _ in range(24)]


def test_feb_29_and_day_or_weekday_are_not_refused():
    assert parse("0 0 29 2 *").next_after(utc(2026, 1, 1)) == utc(2028, 2, 29)
    assert parse("0 0 30 2 1").next_after(utc(2026, 2, 1)) == utc(2026, 2, 2)  # Mondays still match


def test_load_zone_returns_zoneinfo():
    assert load_zone("Europe/Berlin") is BERLIN


# --- API edges ---------------------------------------------------------------------------------------------


def test_next_after_is_strict_and_needs_an_aware_moment():
    schedule = parse("30 2 * * *")
    assert schedule.next_after(utc(2026, 1, 1, 2, 30)) == utc(2026, 1, 2, 2, 30)
    assert schedule.next_after(utc(2026, 1, 1, 2, 29, 59)) == utc(2026, 1, 1, 2, 30)
    assert schedule.next_after(datetime(2026, 1, 1, 3, 30, tzinfo=BERLIN)) == utc(2026, 1, 2, 2, 30)
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.next_after(datetime(2026, 1, 1))


def test_fires_between_is_start_exclusive_end_inclusive_and_bounded():
    schedule = parse("0 * * * *")
    assert list(schedule.fires_between(utc(2026, 1, 1, 0), utc(2026, 1, 1, 3))) == [
        utc(2026, 1, 1, 1),
        utc(2026, 1, 1, 2),
        utc(2026, 1, 1, 3),
    ]
    assert len(list(schedule.fires_between(utc(2026, 1, 1), utc(2027, 1, 1), max_count=10))) == 10
    assert len(list(parse("* * * * *").fires_between(utc(2026, 1, 1), utc(2026, 1, 2)))) == 1000


def test_next_n_is_in_the_task_zone():
    local = parse("0 9 * * 1", "America/New_York").next_n(utc(2026, 1, 1), 2)
    assert [moment.isoformat() for moment in local] == ["2026-01-05T09:00:00-05:00", "2026-01-12T09:00:00-05:00"]
    assert parse("0 9 * * *").next_n(utc(2026, 1, 1), 0) == []


def test_sparse_schedules_skip_ahead_quickly():
    # 2100 is not a leap year, so from 2097 the next 29 February is in 2104; months are skipped, not walked.
    assert parse("0 0 29 2 *").next_n(utc(2097, 3, 1), 1)[0].date().isoformat() == "2104-02-29"


# --- describe ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("30 2 * * 1", "At 02:30, only on Monday"),  # 24-hour times, as every time in the console
        ("@daily", "At 00:00"),
        ("0 * * * *", "Every hour"),
        # A step within hours keeps the library's span: */15 fires at 17:45 too.
        ("*/15 9-17 * * MON-FRI", "Every 15 minutes, between 09:00 and 17:59, Monday through Friday"),
        # One minute within hours: the last firing is 17:00, not "17:59".
        ("0 9-17 * * 1-5", "At 0 minutes past the hour, between 09:00 and 17:00, Monday through Friday"),
        ("0 0 1,15 * 5", "At 00:00, on day 1 and 15 of the month, or on Friday"),
        ("0 0 * * 0,7", "At 00:00, only on Sunday"),  # 7 is Sunday too: not "Sunday and Sunday"
        ("*/7 * * * *", "Every 7 minutes (at :00, :07 … :56 past each hour, so :56 to :00 is 4 min)"),
        ("*/15 * * * *", "Every 15 minutes"),
        # A minute list at one hour: each firing, not "… minutes past the hour, at 01:00" (helper 106).
        ("0,20,40 1 * * *", "At 01:00, 01:20 and 01:40"),
        ("5,35 14 1 * *", "At 14:05 and 14:35, on day 1 of the month"),
        ("0-59 0-23 1-31 1-12 0-7", "Minutes 0 through 59 past the hour, between 00:00 and 23:59, between day 1 and 31 "
                                    "of the month, January through December"),  # not "Sunday through Sunday"
        ("0 */7 * * *", "Every 7 hours (hours 00, 07 … 21 of each day, so 21 to 00 is 3 h)"),
        ("0 */6 * * *", "Every 6 hours"),
        ("0 23 L * *", "At 23:00, on the last day of the month"),
        ("30 2 L,15 * *", "At 02:30, on day 15 and the last day of the month"),  # not "day 15 and L"
        ("  0   3 * * MON  ", "At 03:00, only on Monday"),
        ("not a cron", "not a cron"),
    ],
)
def test_describe_in_words(expression, words):
    assert describe(expression) == words


def _one_at_a_time(schedule, start, end):
    """The firings as next_after answers them, one after another: what fires_between's steady stretch must match."""
    found, moment = [], start
    while (moment := schedule.next_after(moment)) <= end:
        found.append(moment)
    return found


@pytest.mark.parametrize("expression", ["* * * * *", "*/7 * * * *", "30 2 * * *", "0 1-3 * * *", "15 * * * 1-5",
                                        "0 0 L * *", "*/20 1,2 * * 0"])
@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"])
@pytest.mark.parametrize("start", [datetime(2026, 3, 27, 22, 13, 5, tzinfo=UTC),  # over Berlin's spring-forward
                                   datetime(2026, 10, 24, 23, 0, tzinfo=UTC),  # over its fall-back
                                   datetime(2026, 6, 1, 0, 0, tzinfo=UTC)])  # no change anywhere
def test_fires_between_answers_as_next_after_does_across_clock_changes_and_without(expression, zone, start):
    schedule, end = parse(expression, zone), start + timedelta(days=3)
    assert list(schedule.fires_between(start, end, 100_000)) == _one_at_a_time(schedule, start, end)


def test_fires_between_stops_at_max_count_on_a_steady_stretch():
    schedule, start = parse("* * * * *"), datetime(2026, 6, 1, tzinfo=UTC)
    assert list(schedule.fires_between(start, start + timedelta(days=1), 3)) == [
        start + timedelta(minutes=n) for n in (1, 2, 3)]
