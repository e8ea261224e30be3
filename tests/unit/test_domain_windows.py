from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from console.domain.windows import Window, WindowError, WindowSpans

BERLIN, NEW_YORK = ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")
WEEKDAYS = ["mon", "tue", "wed", "thu", "fri"]


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def office_hours(timezone: str = "Europe/Berlin") -> Window:
    return Window.from_mapping({"days": WEEKDAYS, "start": "08:00", "end": "18:00", "timezone": timezone})


def test_from_mapping_reads_names_and_numbers_alike():
    named = office_hours()
    assert named == Window(frozenset(range(5)), time(8), time(18), "Europe/Berlin")
    numbered = Window.from_mapping(
        {"days": [0, 1, 2, 3, 4], "start": "8:00", "end": "18:00", "timezone": "Europe/Berlin"}
    )
    assert numbered == named
    assert Window.from_mapping({"days": ["Saturday", " SUN "], "start": "00:00", "end": "06:00"}).days == {5, 6}


def test_defaults_are_every_day_in_utc():
    window = Window.from_mapping({"start": "22:00", "end": "06:00"})
    assert window.days == frozenset(range(7)) and window.timezone == "UTC"


def test_to_dict_round_trips():
    data = {"days": ["mon", "wed", "sun"], "start": "22:00", "end": "06:30", "timezone": "America/New_York"}
    assert Window.from_mapping(data).to_dict() == data
    assert Window.from_mapping(Window.from_mapping(data).to_dict()) == Window.from_mapping(data)


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"start": "25:00", "end": "06:00"}, "window.start", 'start must be a 24-hour time HH:MM such as "08:00", got'),
        ({"start": "8am", "end": "06:00"}, "window.start", "got '8am'"),
        ({"start": "08:00", "end": "18:60"}, "window.end", "24-hour time"),
        ({"start": "24:00", "end": "06:00"}, "window.start", "24-hour time"),
        ({"start": 1080, "end": "06:00"}, "window.start", "quote it in YAML"),
        ({"start": "08:00"}, "window.end", "end is required"),
        ({"start": "08:00", "end": "18:00", "hours": 3}, "window.hours", "unknown setting 'hours'; known: days"),
        ({"days": [], "start": "08:00", "end": "18:00"}, "window.days", "list at least one day"),
        ({"days": "mon", "start": "08:00", "end": "18:00"}, "window.days", "days must be a list"),
        ({"days": ["funday"], "start": "08:00", "end": "18:00"}, "window.days", "unknown day 'funday'; use mon..sun"),
        ({"days": [7], "start": "08:00", "end": "18:00"}, "window.days", "unknown day 7"),
        ({"days": [True], "start": "08:00", "end": "18:00"}, "window.days", "unknown day True"),
        (
            {"start": "08:00", "end": "18:00", "timezone": "Europe/Pariss"},
            "window.timezone",
            "did you mean 'Europe/Paris'",
        ),
    ],
)
def test_bad_input_names_the_field(data, field, message):
    with pytest.raises(WindowError) as caught:
        Window.from_mapping(data)
    assert caught.value.field == field
    assert message in caught.value.message
    assert str(caught.value).startswith(f"{field}: ")


def test_not_a_mapping_is_refused():
    with pytest.raises(WindowError, match="window must be a mapping"):
        Window.from_mapping(["mon"])


def test_contains_is_half_open_on_the_local_clock():
    window = office_hours()
    # 2026-01-05 is a Monday; Berlin is UTC+1 in winter.
    assert window.contains(utc(2026, 1, 5, 7, 0))
    assert not window.contains(utc(2026, 1, 5, 6, 59, 59))
    assert window.contains(utc(2026, 1, 5, 16, 59, 59))
    assert not window.contains(utc(2026, 1, 5, 17, 0))
    assert not window.contains(utc(2026, 1, 10, 12, 0))  # Saturday
    assert window.contains(datetime(2026, 7, 6, 8, 0, tzinfo=BERLIN))  # summer time, any aware input
    with pytest.raises(ValueError, match="timezone-aware"):
        window.contains(datetime(2026, 1, 5, 9))


def test_window_crossing_midnight_belongs_to_the_day_it_opens():
    window = Window.from_mapping({"days": ["fri"], "start": "22:00", "end": "06:00"})
    # 2026-01-09 is a Friday.
    assert not window.contains(utc(2026, 1, 9, 21, 59))
    assert window.contains(utc(2026, 1, 9, 22, 0))
    assert window.contains(utc(2026, 1, 10, 5, 59))  # Saturday morning, still Friday's window
    assert not window.contains(utc(2026, 1, 10, 6, 0))
    assert not window.contains(utc(2026, 1, 10, 23, 0))  # Saturday night opens nothing
    assert not window.contains(utc(2026, 1, 9, 3, 0))  # Friday morning is Thursday's window, not listed
    assert window.next_opening(utc(2026, 1, 10, 6, 0)) == utc(2026, 1, 16, 22, 0)


def test_equal_start_and_end_is_a_full_day_and_24_00_means_midnight():
    whole_day = Window.from_mapping({"days": ["mon"], "start": "00:00", "end": "24:00"})
    assert whole_day.end == time(0, 0) and whole_day.to_dict()["end"] == "00:00"
    assert whole_day.contains(utc(2026, 1, 5, 0, 0)) and whole_day.contains(utc(2026, 1, 5, 23, 59))
    assert not whole_day.contains(utc(2026, 1, 6, 0, 0))
    evening = Window.from_mapping({"days": ["mon"], "start": "18:00", "end": "24:00"})
    assert evening.contains(utc(2026, 1, 5, 23, 59)) and not evening.contains(utc(2026, 1, 6, 0, 0))


def test_next_opening_is_the_moment_itself_when_open():
    moment = utc(2026, 1, 5, 9, 30, 15)
    assert office_hours().next_opening(moment) == moment


def test_next_opening_skips_the_weekend():
    # Friday 2026-01-09 18:30 Berlin -> Monday 2026-01-12 08:00 CET.
    opening = office_hours().next_opening(datetime(2026, 1, 9, 18, 30, tzinfo=BERLIN))
    assert opening == utc(2026, 1, 12, 7, 0) and opening.tzinfo is UTC
    assert office_hours().next_opening(utc(2026, 1, 12, 6, 59)) == utc(2026, 1, 12, 7, 0)


def test_next_opening_across_dst_keeps_local_time():
    # New York falls back on Sunday 2026-11-01: Friday's 08:00 is 12:00 UTC, Monday's is 13:00 UTC.
    window = office_hours("America/New_York")
    assert window.next_opening(utc(2026, 10, 29, 23, 0)) == utc(2026, 10, 30, 12, 0)
    assert window.next_opening(datetime(2026, 10, 30, 18, 0, tzinfo=NEW_YORK)) == utc(2026, 11, 2, 13, 0)
    # Berlin springs forward on Sunday 2026-03-29: Monday's 08:00 is 06:00 UTC.
    assert office_hours().next_opening(utc(2026, 3, 27, 20, 0)) == utc(2026, 3, 30, 6, 0)


def test_opening_in_the_spring_forward_gap_moves_to_its_end():
    nightly = Window.from_mapping(
        {"days": list(range(7)), "start": "02:30", "end": "04:00", "timezone": "Europe/Berlin"}
    )
    # 02:30 does not exist on 2026-03-29; the window opens at 03:00 CEST (01:00 UTC) instead of skipping the day.
    assert nightly.next_opening(utc(2026, 3, 28, 12)) == utc(2026, 3, 29, 1, 0)
    assert nightly.contains(utc(2026, 3, 29, 1, 59)) and not nightly.contains(utc(2026, 3, 29, 2, 0))
    assert nightly.next_opening(utc(2026, 3, 29, 2, 0)) == utc(2026, 3, 30, 0, 30)


def test_opening_in_a_repeated_hour_uses_the_first_occurrence():
    early = Window.from_mapping({"days": ["sun"], "start": "01:30", "end": "03:00", "timezone": "America/New_York"})
    # 01:30 happens twice on 2026-11-01; the window opens at the first (EDT, 05:30 UTC) and runs to 03:00 EST.
    assert early.next_opening(utc(2026, 10, 31, 12)) == utc(2026, 11, 1, 5, 30)
    assert early.contains(utc(2026, 11, 1, 7, 59)) and not early.contains(utc(2026, 11, 1, 8, 0))


def test_direct_construction_is_validated():
    with pytest.raises(WindowError) as caught:
        Window(frozenset({0}), "08:00", time(18), "UTC")
    assert caught.value.field == "window.start"
    with pytest.raises(WindowError) as caught:
        Window(frozenset(), time(8), time(18))
    assert caught.value.field == "window.days"


@pytest.mark.parametrize("window", [
    {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00", "timezone": "Europe/Berlin"},
    {"days": ["fri", "sat"], "start": "22:00", "end": "06:00", "timezone": "America/New_York"},
    {"days": ["sun"], "start": "02:00", "end": "02:30", "timezone": "Europe/Berlin"},  # inside the spring-forward gap
    {"days": ["sat", "sun"], "start": "03:00", "end": "03:00", "timezone": "Europe/Berlin"},  # 24 hours
])
@pytest.mark.parametrize("start", [datetime(2026, 3, 25, tzinfo=UTC), datetime(2026, 10, 21, tzinfo=UTC)])
def test_window_spans_answer_as_the_window_does_for_every_moment_of_their_horizon(window, start):
    """The forecast asks a window's spans about each firing; they must say what the planner's window says."""
    shape, end = Window.from_mapping(window), start + timedelta(days=14)
    spans = WindowSpans(shape, start, end)
    moment = start
    while moment <= end:
        assert spans.next_opening(moment) == shape.next_opening(moment), moment
        moment += timedelta(minutes=7)
