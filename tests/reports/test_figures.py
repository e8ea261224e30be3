"""Every figure on a hand-built history whose answers are known (tests/reports/history.py)."""

from datetime import timedelta

import pytest

from console.domain import periods
from console.extensions import db
from console.models import Task
from console.services.reports import figures, read, rollup
from console.services.reports.read import Scope
from tests.reports import history


def test_each_figure_on_the_known_history(built, clock):
    summary = figures.summary(periods.preset("24h", clock()), Scope(), clock())
    got = {name: value.value for name, value in summary.values.items()}
    assert got == {
        # holder 0 s, office 10 s after its window opened, edge at exactly 60 s: on time; edge at 61 s: late.
        "on_time_rate": 3 / 4,
        "trigger_delay_p50_s": pytest.approx(10.0),  # buckets (5, 10] and (45, 60] and (60, 90]
        "trigger_delay_p95_s": pytest.approx(84.0),
        "trigger_delay_p99_s": pytest.approx(88.8),
        # 11 series ended: 8 succeeded; the twice-dead run's two deaths and the recovered run's one failed.
        "execution_success_rate": 8 / 11,
        # failed at least once: twice-dead, recovered (by a person), retried, duplicate; the last two alone.
        "retry_success_rate": 2 / 4,
        "duplicate_rate": 1 / 11,
        "dead_letters_created": 3,
        "dead_letters_recovered": 1,
        "dead_letters_open": 1,
        "recovery_time_p50_s": pytest.approx(600.0),  # one letter, bucket (300, 900]
        "recovery_time_p90_s": pytest.approx(840.0),
        "alert_latency_p50_s": pytest.approx(45.0),  # 30 s, 45 s and 400 s
        "alert_latency_p95_s": pytest.approx(555.0),
        # two work orders: the recovered run's closed, the twice-dead run's open
        "workorder_completion_rate": 1 / 2,
        "sla_breaches": 1,
        # the office window was forecast at 08:55; the ledger mutex was not
        "conflict_warning_hit_rate": 1 / 2,
    }
    met = {name: value.met for name, value in summary.values.items() if value.figure.target is not None}
    assert met == {"on_time_rate": False, "trigger_delay_p99_s": False, "execution_success_rate": False,
                   "retry_success_rate": False, "duplicate_rate": False, "alert_latency_p95_s": False,
                   "workorder_completion_rate": False, "conflict_warning_hit_rate": False}
    # The history starts in this period: the one before measured nothing, so it has no figures (not zeros).
    assert all(value.previous is None and value.trend is None for value in summary.values.values())


def test_the_task_filter_narrows_every_rollup_figure(built, clock):
    summary = figures.summary(periods.preset("24h", clock()), Scope(task_id=built["edge"]), clock())
    assert summary.values["on_time_rate"].value == 1 / 2
    assert summary.values["sla_breaches"].value == 1
    assert summary.values["dead_letters_created"].value == 0
    assert summary.values["execution_success_rate"].value == 1.0


def test_a_run_still_waiting_past_its_limit_counts_late_now(built, clock):
    edge = db.session.get(Task, built["edge"])
    history.fire(edge, clock() - timedelta(seconds=61))  # due 61 s ago, not started
    rollup.tick(clock)
    period = periods.preset("24h", clock())
    assert figures.summary(period, Scope(task_id=edge.id), clock()).values["on_time_rate"].value == 1 / 3
    # the period before did not include now: nothing read live there
    assert figures.inputs(period.previous, Scope(task_id=edge.id), clock(), current=False).late_waiting == 0


def test_the_heat_map_and_tables_read_the_same_rollups(built, clock):
    period = periods.preset("24h", clock())
    heat = read.on_time_by_hour_of_day(period, Scope(), [built["edge"], built["office"]])
    assert heat == {(built["edge"], 9): (2, 1), (built["office"], 10): (1, 1)}
    tasks = read.per_task(period, Scope())
    assert sum(counts["dead_letters"] for counts in tasks.values()) == 3
    [top, second] = read.fingerprints(period, Scope())
    assert (top.error_code, top.message, top.letters) == ("gateway_down", "gateway down", 2)
    assert (second.error_code, second.letters) == ("ledger_locked", 1)


def test_a_later_period_sees_this_one_as_its_previous(built, clock):
    clock.advance(24 * 3600)
    rollup.tick(clock)
    summary = figures.summary(periods.preset("24h", clock()), Scope(), clock())
    assert summary.values["dead_letters_created"].previous == 3
    assert summary.values["dead_letters_created"].value == 0
    assert summary.values["on_time_rate"].previous == 3 / 4 and summary.values["on_time_rate"].value is None


def test_a_date_range_of_a_day_is_drawn_per_hour_from_the_hour_rows(built, clock):
    """A From/To of one or two days drew an hourly trend whose whole day sat on its midnight hour, the other 23
    empty, and the midnight point's link opened that hour alone (helper 124)."""
    day = periods.between(history.START.date(), history.START.date())
    assert day.hourly
    buckets = read.per_bucket(day, Scope())
    busy = sorted(hour for hour, counts in buckets.items() if any(counts.values()))
    assert len(busy) > 1 and busy[0] > history.START  # its runs start from 09:00 on, not at midnight
    totals = read.totals(day, Scope())
    assert sum((counts for counts in buckets.values()), start=type(totals)()) == totals
