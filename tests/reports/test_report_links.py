"""Where the Reports page's table rows lead: each row to its own tenant's runs and dead letters."""

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

from console.domain.figures import BY_NAME
from console.domain.periods import MINUTE, Period
from console.services.dlq.filters import MOMENT
from console.services.reports.read import Scope
from console.web.reports import charts
from console.web.reports.links import RUN_TIME, Links

PERIOD = Period(datetime(2026, 3, 1, 11, tzinfo=UTC), datetime(2026, 3, 2, 11, tzinfo=UTC), "24h")


def query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def test_a_row_of_one_tenant_leads_to_that_tenants_runs_and_letters_when_the_page_shows_every_tenant(app):
    # A handler run without a task is the same handler in every tenant: only the tenant tells the rows apart.
    links = Links(PERIOD, Scope(), None, {})
    row = SimpleNamespace(tenant="acme", task_id=None, handler="python:demo.flaky")
    with app.test_request_context():
        runs, letters = query(links.row_runs(row)), query(links.dlq_created(None, row.handler, tenant=row.tenant))
    assert runs["tenant"] == ["acme"] and runs["handler"] == ["python:demo.flaky"] and "q" not in runs
    assert letters["tenant"] == ["acme"] and letters["task"] == ["untasked:python:demo.flaky"]
    # A page already narrowed to one tenant keeps it.
    with app.test_request_context():
        narrowed = Links(PERIOD, Scope(tenant_id=3), "globex", {})
        assert query(narrowed.runs())["tenant"] == ["globex"]


def test_a_daily_trend_ticks_on_whole_days_never_twice_a_date():
    for days in (3, 7, 30, 90):
        start = datetime(2026, 12, 1, tzinfo=UTC)
        points = {start + timedelta(days=n): 0.9 for n in range(days)}
        axis = json.loads(charts.trend(BY_NAME["execution_success_rate"], points, [""] * days, False))["layout"][
            "xaxis"]
        assert axis["tick0"] == start.isoformat() and axis["dtick"] % charts.DAY_MS == 0
        assert days / (axis["dtick"] / charts.DAY_MS) <= 6  # at most six labels, each a different day
    hourly = json.loads(charts.trend(BY_NAME["execution_success_rate"], points, [""] * days, True))["layout"]["xaxis"]
    assert "dtick" not in hourly


def test_a_time_trend_reads_in_the_unit_its_values_need_not_in_kiloseconds():
    start = datetime(2026, 12, 1, tzinfo=UTC)

    def drawn(seconds: list[float | None]) -> tuple[list, str]:
        points = {start + timedelta(days=n): value for n, value in enumerate(seconds)}
        chart = json.loads(charts.trend(BY_NAME["recovery_time_p50_s"], points, [""] * len(seconds), False))
        return chart["data"][0]["y"], chart["layout"]["yaxis"]["ticksuffix"]

    assert drawn([12_300, 7_200, None]) == ([3.4167, 2.0, None], " h")  # was 12.3k s
    assert drawn([300, 90]) == ([5.0, 1.5], " min")
    assert drawn([2.5, None]) == ([2.5, None], " s")
    assert drawn([None]) == ([None], " s")


def test_every_page_a_chart_point_opens_writes_its_times_alike():
    # Links.buckets swaps one pair of marks in a chart's link, whichever page it leads to.
    assert RUN_TIME == MOMENT == MINUTE


def test_a_trend_with_nothing_measured_says_so_instead_of_drawing_its_target_on_bare_axes():
    start = datetime(2025, 1, 1, tzinfo=UTC)
    chart = json.loads(charts.trend(BY_NAME["execution_success_rate"], {start + timedelta(days=n): None
                                                                          for n in range(5)}, [""] * 5, False))
    assert len(chart["data"]) == 1  # no target line to set the axis by
    assert chart["layout"]["annotations"][0]["text"] == "nothing measured in this period"
    assert chart["layout"]["yaxis"]["showticklabels"] is False
    measured = json.loads(charts.trend(BY_NAME["execution_success_rate"], {start: 0.99}, [""], False))
    assert len(measured["data"]) == 2 and "annotations" not in measured["layout"]


def test_the_heat_maps_labels_are_cut_short_apart_with_the_whole_name_in_the_tooltip():
    """A manager's phone: 200 px of names left the 24 hours 70 px; two names cut alike must stay two rows."""
    rows = [SimpleNamespace(tenant="acme", task_id=n, task=f"nightly-settlement-of-card-payments-{n}")
            for n in (1, 2)] + [SimpleNamespace(tenant="acme", task_id=3, task="short"),
                                SimpleNamespace(tenant="acme", task_id=4, task="nightly-settlement-of-card-payments-1")]
    heat = SimpleNamespace(tasks=rows, cells={(1, 9): (4, 3)}, rate=lambda task_id, hour: 0.75 if (
        task_id, hour) == (1, 9) else None)
    chart = json.loads(charts.heat_map(heat, [[""] * 24] * 4))
    labels = chart["data"][0]["y"]
    assert labels == ["acme / night…-payments-1", "acme / night…-payments-2", "acme / short",
                      "acme / night…-payments-1 (2)"]  # two names that cut alike stay two rows
    assert chart["data"][0]["text"][0][9] == "acme / nightly-settlement-of-card-payments-1<br>9:00 UTC: 3 of 4"
    assert chart["layout"]["margin"]["l"] < 40 and chart["layout"]["yaxis"]["automargin"] is True
