"""A bulk replay's progress as its panel and the API say it: the time left at the pace it really goes."""

from datetime import UTC, datetime, timedelta

from console.services.dlq.bulk import Progress

START = datetime(2026, 12, 6, 14, 10, 35, tzinfo=UTC)


def progress(processed: int, *, rate: float = 50, total: int = 5124) -> Progress:
    return Progress("a522b9f9d1dd", "running", total, processed, 0, 0, rate, "op1", "group http_504", START, None,
                    None)


def test_the_time_left_follows_the_pace_seen_once_it_is_slower_than_asked():
    """Asked 50/s, it went at 10/s (the workers' own queue first): "about 52 s left" stood for minutes (helper 129)."""
    four_minutes_in = START + timedelta(minutes=4)
    slow = progress(2500)  # 2,500 in 240 s: 10.4 a second
    assert round(slow.pace(four_minutes_in), 1) == 10.4
    assert slow.eta_s(four_minutes_in) == round((5124 - 2500) / (2500 / 240))
    fast = progress(2400)  # 2,400 in 48 s: as asked, and the time left is the rate's
    assert fast.eta_s(START + timedelta(seconds=48)) == round((5124 - 2400) / 50)
    assert progress(0).eta_s(START + timedelta(seconds=2)) == round(5124 / 50)  # nothing seen yet: the rate asked


def test_as_fast_as_it_can_has_a_time_left_once_it_has_gone_a_while():
    unpaced = progress(1000, rate=0)
    assert unpaced.eta_s(START + timedelta(seconds=1)) is None  # too soon to say
    assert unpaced.eta_s(START + timedelta(seconds=20)) == round((5124 - 1000) / 50)
