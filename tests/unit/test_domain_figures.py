"""Bucketed percentiles, targets, trends and report periods: the pure maths of the reports."""

from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest

from console.domain import periods
from console.domain.figures import (
    BY_NAME,
    FIGURES,
    HEADLINE,
    MEASURES,
    Inputs,
    bases,
    met,
    shown,
    target_text,
    trend,
    values,
)
from console.domain.histograms import ALERT_LATENCY, RECOVERY, TRIGGER_DELAY, Histogram, percentile


def test_a_value_on_an_edge_falls_in_the_bucket_that_edge_closes():
    assert TRIGGER_DELAY.column(60) == TRIGGER_DELAY.column(45.5) != TRIGGER_DELAY.column(60.001)
    assert TRIGGER_DELAY.column(0) == "delay_0" and TRIGGER_DELAY.column(10**9) == f"delay_{len(TRIGGER_DELAY.edges)}"


def test_percentile_interpolates_inside_its_bucket_and_merges_by_adding_counts():
    histogram = Histogram("h", (10, 20, 40))
    hour_one, hour_two = [1, 0, 0, 0], [0, 2, 1, 0]
    merged = [a + b for a, b in zip(hour_one, hour_two, strict=True)]
    assert percentile(merged, histogram.edges, 0.5) == pytest.approx(15.0)  # rank 2 of 4: half-way into (10, 20]
    assert percentile(merged, histogram.edges, 1.0) == pytest.approx(40.0)
    assert percentile([0, 0, 0, 3], histogram.edges, 0.5) == 40.0  # past the last edge: at least 40
    assert percentile([0, 0, 0, 0], histogram.edges, 0.5) is None


def test_a_target_on_a_bucket_edge_is_judged_exactly():
    counts = dict.fromkeys(ALERT_LATENCY.columns, 0)
    counts[ALERT_LATENCY.column(300)] = 95
    counts[ALERT_LATENCY.column(301)] = 5
    p95 = ALERT_LATENCY.percentile(counts, 0.95)
    assert p95 == pytest.approx(300.0) and met(BY_NAME["alert_latency_p95_s"], p95)
    counts[ALERT_LATENCY.column(301)] = 6
    assert not met(BY_NAME["alert_latency_p95_s"], ALERT_LATENCY.percentile(counts, 0.95))


def test_every_headline_figure_is_defined_once_and_every_figure_has_a_value():
    assert len({f.name for f in FIGURES}) == len(FIGURES) and set(HEADLINE) <= set(BY_NAME)
    assert set(values(Inputs(totals={}))) == set(BY_NAME)
    assert len(MEASURES) == len(set(MEASURES))


def test_rates_are_none_without_a_denominator_and_targets_hold_both_ways():
    got = values(Inputs(totals={"starts": 0, "finished": 4, "succeeded": 4}))
    assert got["on_time_rate"] is None and got["execution_success_rate"] == 1.0
    assert met(BY_NAME["on_time_rate"], None) is None
    assert met(BY_NAME["on_time_rate"], 0.98) and not met(BY_NAME["on_time_rate"], 0.9799)
    assert met(BY_NAME["duplicate_rate"], 0.0049) and not met(BY_NAME["duplicate_rate"], 0.005)
    assert met(BY_NAME["sla_breaches"], 4) is None
    assert (trend(2, 1), trend(1, 2), trend(1, 1), trend(None, 1)) == ("up", "down", "flat", None)
    # Judged as people read the figure: "2.0 s, before 2.0 s" has no arrow up; 98.4 % and 98.5 % differ.
    delay, rate = BY_NAME["trigger_delay_p95_s"], BY_NAME["on_time_rate"]
    assert (trend(2.04, 1.96, delay), trend(2.2, 2.0, delay)) == ("flat", "up")
    assert (trend(0.98449, 0.98441, rate), trend(0.985, 0.984, rate)) == ("flat", "up")


def test_presets_include_the_current_hour_or_day_and_previous_is_as_long():
    now = datetime(2026, 3, 2, 10, 17, tzinfo=UTC)
    day = periods.preset("24h", now)
    assert (day.start, day.end) == (datetime(2026, 3, 1, 11, tzinfo=UTC), datetime(2026, 3, 2, 11, tzinfo=UTC))
    period = periods.preset("7d", now)
    assert (period.start, period.end) == (datetime(2026, 2, 24, tzinfo=UTC), datetime(2026, 3, 3, tzinfo=UTC))
    assert period.previous.end == period.start and period.previous.length == timedelta(days=7)
    assert periods.preset("24h", now).hourly and not period.hourly


def test_a_date_range_covers_whole_days_and_bad_input_names_the_field():
    period = periods.choose(None, "2026-03-01", "2026-03-02", datetime.now(UTC))
    assert (period.start, period.end) == (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 3, tzinfo=UTC))
    for args, field in (((None, "2026-03-01", None), "to"), ((None, "yesterday", "2026-03-01"), "from"),
                        ((None, "2026-03-02", "2026-03-01"), "to"), (("1y", None, None), "period"),
                        ((None, "2024-01-01", "2026-01-01"), "from")):
        with pytest.raises(periods.PeriodError) as error:
            periods.choose(*args, datetime.now(UTC))
        assert error.value.field == field
    assert periods.between(date(2026, 1, 1), date(2026, 1, 1)).length == timedelta(days=1)
    # A period that has not begun is refused (a manager's walk: "7 d 16 h to come … beside the 3 days before").
    now = datetime(2026, 12, 5, 7, 30, tzinfo=UTC)
    with pytest.raises(periods.PeriodError, match=r"from is after now \(2026-12-05 07:30 UTC\)") as error:
        periods.choose(None, "2026-12-10", "2026-12-12", now)
    assert error.value.field == "from"
    with pytest.raises(periods.PeriodError) as error:
        periods.choose(None, None, None, now, "2026-12-05T08:00", "2026-12-05T09:00")
    assert error.value.field == "since"
    assert periods.choose(None, "2026-12-05", "2026-12-07", now).end == datetime(2026, 12, 8, tzinfo=UTC)  # begun


def test_a_span_of_minutes_is_widened_to_the_whole_hours_it_touches():
    """05:30-06:15 was said in the page's header and counted as 06:00-07:00: the rollups are hourly (helper 124)."""
    period = periods.span("2026-12-04T05:30", "2026-12-04T06:15")
    assert (period.start, period.end) == (datetime(2026, 12, 4, 5, tzinfo=UTC), datetime(2026, 12, 4, 7, tzinfo=UTC))
    whole = periods.span("2026-12-04T05:00", "2026-12-04T06:00")
    assert (whole.start, whole.end) == (datetime(2026, 12, 4, 5, tzinfo=UTC), datetime(2026, 12, 4, 6, tzinfo=UTC))


def test_the_readme_defines_each_figure_in_the_words_of_its_tooltip():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for figure in FIGURES:
        assert f"| `{figure.name}` |" in readme and figure.definition in readme, figure.name


def test_the_time_to_recover_percentiles_say_they_are_exact_to_their_bucket_and_name_its_edges():
    # Recoveries of 3.2 and 8.9 min are counted in (1, 5 min] and (5, 15 min]: p90 reads 13 min, more than either.
    counts = [0] * len(RECOVERY.columns)
    counts[RECOVERY.edges.index(300)] += 1
    counts[RECOVERY.edges.index(900)] += 1
    assert percentile(counts, RECOVERY.edges, 0.9) == pytest.approx(780.0)
    for name in ("recovery_time_p50_s", "recovery_time_p90_s"):
        words = BY_NAME[name].definition
        assert "exact to the bucket, interpolated inside it" in words, name
        assert "1, 5, 15, 30 min, 1, 2, 4, 8, 16, 24 h, 2, 4, 7, 14, 30 days" in words, name


def test_the_retry_figure_counts_runs_that_failed_at_least_once_and_says_so():
    """"102 of 146 runs that retried" counted 7 that never retried (a first attempt that failed for good), as the
    definition does: the words now follow it (helper 124)."""
    assert bases(Inputs(totals=Counter(retried=146, retry_succeeded=102)))["retry_success_rate"] == (
        102, 146, "runs that failed at least once")


def test_a_rate_that_misses_its_target_never_reads_as_the_target():
    # "97.0 % · target ≥ 97.0 % · missed" for 96.97 % contradicted its verdict (helper 172).
    success = next(f for f in FIGURES if f.name == "execution_success_rate")
    duplicates = next(f for f in FIGURES if f.name == "duplicate_rate")
    assert (shown(success, 1982 / 2044), shown(success, 0.97), shown(success, 0.9704)) == ("96.97 %", "97.0 %",
                                                                                          "97.0 %")
    assert (shown(duplicates, 0.00501), shown(duplicates, 0.005), target_text(duplicates)) == ("0.501 %", "0.50 %",
                                                                                              "< 0.50 %")
