"""/reports for managers: cards against targets, charts, links behind them, CSV of every table, breaches."""

import csv
import html as html_text
import io
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from console.domain.figures import FIGURES
from console.extensions import db
from console.models import DeadLetter, Delivery, Run, SlaBreach, Task
from console.models.reports import report_error_hours
from console.services.engine import control
from console.services.engine.execute import execute
from console.services.people import tenants
from console.services.reports import page, rollup
from console.services.scheduling import sla, tasks
from tests.factories import BROKEN, LENIENT, make_tenant
from tests.helpers import Auth
from tests.reports import history


@pytest.fixture
def manager(built, client, auth, clock, monkeypatch):
    monkeypatch.setattr("console.web.reports.views.utcnow", clock)
    return auth.as_role("manager", "maria")


def card(html: str, name: str) -> str:
    match = re.search(rf'<a class="report-card ([a-z]+)" href="([^"]+)"\s+title="[^"]*" data-name="{name}">(.*?)</a>',
                      html, re.S)
    assert match, name
    return match


def run_rows(html: str) -> set[int]:
    return {int(run_id) for run_id in re.findall(r'<td class="num mono"><a href="/runs/(\d+)">', html)}


def test_a_manager_sees_every_figure_as_a_card_against_its_target(manager, client):
    response = client.get("/reports?period=24h")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert 'href="/reports"' in html  # the Reports area is in the nav
    on_time = card(html, "on_time_rate")
    assert on_time.group(1) == "missed" and "75.0 %" in on_time.group(3) and "≥ 98.0 %" in on_time.group(3)
    assert '<strong class="verdict">missed</strong>' in on_time.group(3)  # said in words, not by colour alone
    assert '<span class="basis">3 of 4 starts</span>' in on_time.group(3)  # what the rate is of
    assert card(html, "sla_breaches").group(1) == "untargeted" and "verdict" not in card(html, "sla_breaches").group(3)
    for figure in FIGURES:
        assert f'data-name="{figure.name}"' in html
        assert figure.definition.replace("'", "&#39;")[:60] in html  # the tooltip's words


def test_cards_and_charts_lead_to_the_runs_and_dead_letters_behind_them(manager, client, built):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    success = card(html, "execution_success_rate").group(2).replace("&amp;", "&")
    assert success.startswith("/runs?") and "failed=1" in success and "status=" not in success
    assert "series_from=2026-03-01T11:00" in success and "created_from" not in success
    # Every run with a failed series, whatever it is now: the replayed one that then succeeded too.
    listed = run_rows(client.get(success).get_data(as_text=True))
    assert {built["twice_dead"], built["recovered"]} <= listed and built["edge_late"] not in listed
    assert card(html, "dead_letters_open").group(2).startswith("/dlq/")
    assert card(html, "on_time_rate").group(2).startswith("/reports/breaches?")
    orders = card(html, "workorder_completion_rate").group(2).replace("&amp;", "&")
    assert orders == "/workorders?status=all&since=2026-03-01T11:00&until=2026-03-02T11:00"
    assert client.get(orders).status_code == 200
    charts = [json.loads(raw.replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&").replace("&#39;", "'"))
              for raw in re.findall(r'data-figure="([^"]+)"', html)]
    assert len(charts) >= 16
    links = [link for chart in charts for trace in chart["data"] for link in (trace.get("customdata") or [])
             if isinstance(link, str)]
    assert links and all(link.startswith(("/runs?", "/dlq/", "/reports/breaches", "/workorders?")) for link in links)


def test_every_chart_has_a_table_a_keyboard_and_a_screen_reader_can_read(manager, client, built):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    # The charts' hours are UTC's, as the period's: said where the charts are (the breaches' tables may read local).
    assert '<h2>Hourly trend <span class="subtle">(UTC hours)</span></h2>' in html
    assert html.count('data-figure="') == html.count('aria-hidden="true"></div>')  # Plotly's drawing is left out
    tables = re.findall(r'<details class="chart-table no-print"><summary>As a table<span class="visually-hidden">: '
                        r'([^<]+)</span></summary>(.*?)</details>', html, re.S)
    assert len(tables) == len(re.findall(r'class="trend-chart"', html)) + 1  # each trend, and the heat map
    labels = dict(tables)
    success = labels["Execution success"]
    hours = re.findall(r'<tr><td class="mono">([^<]+)</td><td class="num">(.*?)</td></tr>', success)
    assert len(hours) == 24 and hours[0][0] == "Sun 03-01 11:00"  # each hour of the period, oldest first
    values = [re.search(r'<a href="(/runs\?[^"]+)">([^<]+)</a>', cell) for _, cell in hours if cell != "—"]
    assert values and all(value and value[2].endswith(" %") for value in values)  # each links the runs behind it
    heat = labels["on time by task and hour of day"]
    assert "<th>Task</th>" in heat and heat.count("<tr><td>") == 3  # one row per task the heat map draws (24 h: 3)
    hours = re.findall(r'<li><a href="/reports/breaches\?[^"]+">(\d\d) h: ([\d.]+) %</a> '
                       r'<span class="subtle">\((\d+) of (\d+)\)</span></li>', heat)
    assert hours and all(round(100 * int(on) / int(starts), 1) == float(rate) for _, rate, on, starts in hours)


def dlq_rows(html: str) -> list[str]:
    return re.findall(r'<tr id="dl-(\d+)" class="dl-row', html)


def test_the_dead_letters_created_card_and_column_list_exactly_what_they_count(manager, client):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    created = card(html, "dead_letters_created")
    count = int(re.search(r'class="value[^"]*">\s*(\d+)', created.group(3)).group(1))
    behind = created.group(2).replace("&amp;", "&")
    assert "status=any" in behind and "since=2026-03-01T11:00" in behind and "until=2026-03-02T11:00" in behind
    listed = client.get(behind).get_data(as_text=True)
    assert len(dlq_rows(listed)) == count > 0  # replayed ones too, not only those still open
    assert "Created from 2026-03-01 11:00 before 2026-03-02 11:00 UTC" in listed
    # A row of runs submitted without a task leads to that handler's runs and letters, not to everything.
    adhoc = re.search(r'<a href="([^"]+)">[^<]*\(no task\)</a>', html)
    assert adhoc and "handler=python:demo.flaky" in adhoc.group(1)
    assert client.get(adhoc.group(1).replace("&amp;", "&")).status_code == 200
    letters = re.search(r'href="(/dlq/[^"]*task=untasked:python:demo.flaky[^"]*)">(\d+)</a>', html)
    assert letters and len(dlq_rows(client.get(letters.group(1).replace("&amp;", "&")).get_data(as_text=True))) \
        == int(letters.group(2))


def test_the_recovered_card_lists_the_letters_whose_run_succeeded_in_the_period(manager, client, built):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    recovered = card(html, "dead_letters_recovered")
    count = int(re.search(r'class="value[^"]*">\s*(\d+)', recovered.group(3)).group(1))
    behind = recovered.group(2).replace("&amp;", "&")
    assert "recovered_since=2026-03-01T11:00" in behind and "recovered_until=2026-03-02T11:00" in behind
    listed = client.get(behind).get_data(as_text=True)
    rows = dlq_rows(listed)
    assert len(rows) == count == 1  # the replayed letter of the run that died twice is not recovered
    letters = {letter.run_id: letter.id for letter in db.session.query(DeadLetter)}
    assert rows == [str(letters[built["recovered"]])]
    assert "Run succeeded after the letter, from 2026-03-01 11:00 before 2026-03-02 11:00 UTC" in listed
    assert card(html, "recovery_time_p50_s").group(2) == recovered.group(2)
    # Outside the period nothing was recovered; a bad bound says what to fix.
    assert dlq_rows(client.get(behind.replace("recovered_until=2026-03-02T11:00",
                                              "recovered_until=2026-03-01T12:00")).get_data(as_text=True)) == []
    refused = client.get("/dlq/?view=list&status=any&recovered_since=soon")
    assert refused.status_code == 422 and "recovered_since=soon is not a date and time" in refused.get_data(
        as_text=True)


def test_a_task_rows_late_starts_open_exactly_its_late_runs(manager, client, built):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    late = re.search(r'<td class="num"><a href="(/runs\?[^"]*late=1[^"]*)">(\d+)</a></td>', html)
    behind = late.group(1).replace("&amp;", "&")
    assert "late=1" in behind and f"task={built['edge']}" in behind and late.group(2) == "1"
    listed = client.get(behind).get_data(as_text=True)
    assert run_rows(listed) == {built["edge_late"]}  # the run that started at its limit exactly is on time
    assert "started more than 60 s after it was due" in listed
    refused = client.get("/runs?late=1")
    assert refused.status_code == 422 and "late starts are a task&#39;s: choose the task" in refused.get_data(
        as_text=True)


def test_automatic_retry_success_opens_the_runs_whose_first_series_failed(manager, client, built):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    behind = card(html, "retry_success_rate").group(2).replace("&amp;", "&")
    assert "retried=1" in behind and "status=" not in behind
    listed = run_rows(client.get(behind).get_data(as_text=True))
    assert {built["twice_dead"], built["recovered"]} <= listed  # and the retry that worked on its own
    assert built["edge_late"] not in listed and built["duplicate"] not in listed  # never failed in series 1
    assert card(html, "execution_success_rate").group(2) != card(html, "retry_success_rate").group(2)


def test_the_success_cards_open_the_runs_whose_series_they_count_whenever_created(manager, client, clock, built):
    """A manager's walk: Execution success read 16 failed series while its link listed 15 runs, and Automatic retry
    success 19 runs while its link listed 22: the links chose runs by when they were created, the cards count series
    by when they ended."""
    now = clock()
    clock.set(now - timedelta(days=2))  # created before the period, replayed and dead again inside it
    old = history._adhoc(clock, {"fail_times": 9, "code": "gateway_down"})
    assert execute(old, 0, clock=clock) == "dead"
    clock.set(now - timedelta(hours=1))
    control.replay(history._letter(old), history.OPS, clock=clock)
    assert execute(old, 0, clock=clock) == "dead"
    waiting = history._adhoc(clock, {"fail_times": 1}, history.TWO_ATTEMPTS)  # still retrying: not ended
    assert execute(waiting, 0, clock=clock) == "retry_wait"
    clock.set(now)
    html = client.get("/reports?period=24h").get_data(as_text=True)
    failed = run_rows(client.get(card(html, "execution_success_rate").group(2).replace("&amp;", "&")).get_data(
        as_text=True))
    assert old in failed and {built["twice_dead"], built["recovered"]} <= failed
    page_html = client.get(card(html, "retry_success_rate").group(2).replace("&amp;", "&")).get_data(as_text=True)
    assert waiting not in run_rows(page_html) and old not in run_rows(page_html)  # its first series ended before
    assert "Its first series ended between 2026-03-01 11:00 and 2026-03-02 11:00 UTC, whenever it was created" in \
        page_html


def test_a_range_before_the_first_recorded_run_measured_nothing_not_zeros(manager, client, built):
    """A manager's walk: an old empty range drew flat zeros for SLA breaches and dead letters, and its cards read 0
    beside a "before" of "—"."""
    html = client.get("/reports?from=2025-01-01&to=2025-01-07").get_data(as_text=True)
    charts = re.findall(r'data-figure="([^"]+)"', html)
    assert charts and all("nothing measured in this period" in chart for chart in charts[:16])
    for name in ("sla_breaches", "dead_letters_created", "dead_letters_recovered"):
        assert "—" in card(html, name).group(3), name
    # What is about now stands whatever the period: the letters open now (it read "—").
    open_now = db.session.execute(select(func.count()).select_from(DeadLetter).where(DeadLetter.status == "open"))
    assert open_now.scalar_one() == 1 and '<span class="value">1</span>' in card(html, "dead_letters_open").group(3)


def test_duplicate_execution_opens_the_runs_whose_handler_succeeded_twice(manager, client, built):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    behind = card(html, "duplicate_rate").group(2).replace("&amp;", "&")
    assert "duplicated=1" in behind
    assert run_rows(client.get(behind).get_data(as_text=True)) == {built["duplicate"]}


def test_conflict_early_warning_opens_the_firings_held_back_by_a_conflict(manager, client, built):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    behind = card(html, "conflict_warning_hit_rate").group(2).replace("&amp;", "&")
    assert "conflicted=1" in behind and "status=" not in behind
    listed = client.get(behind).get_data(as_text=True)
    # The office firing its window deferred (the forecast named it) and the one the ledger mutex skipped (it did not).
    assert run_rows(listed) == {built["office_run"], built["forbidden"]}
    assert "A firing held back by a conflict" in listed


def _dead_with_alert(runs, clock, died: str, delivered: str, tenant: str = "default", held: bool = False) -> int:
    """Make a dead letter at `died` (HH:MM on 2026-03-02) whose alert is delivered at `delivered`; `held`: a repeat
    held back to gather a count before it went out. Return the letter's id."""
    clock.set(datetime(2026, 3, 2, *map(int, died.split(":")), tzinfo=UTC))
    run_id = runs.submit("demo.flaky", BROKEN, policy=LENIENT, tenant=tenant, clock=clock)
    assert execute(run_id, 0, clock=clock) == "dead"
    [letter] = runs.dead_letters(run_id)
    [alert] = [row for row in runs.outbox("alert") if row.payload.get("dead_letter_id") == letter.id]
    alert.status = "delivered"
    alert.delivered_at = alert.first_sent_at = datetime(2026, 3, 2, *map(int, delivered.split(":")), tzinfo=UTC)
    if held:
        db.session.add(Delivery(outbox_id=alert.id, channel="default", attempt=1, outcome="held", at=clock()))
    db.session.commit()
    return letter.id


def test_alert_latency_opens_the_letters_whose_alert_was_delivered_in_the_hour_not_created(app, client, auth, clock,
                                                                                          monkeypatch, runs):
    monkeypatch.setattr("console.web.reports.views.utcnow", clock)
    acme = make_tenant("acme")
    late = _dead_with_alert(runs, clock, "09:58", "10:05")  # counted in the 10:00 hour, when its alert went out
    _dead_with_alert(runs, clock, "10:10", "10:12", held=True)  # a held-back repeat: not timed
    theirs = _dead_with_alert(runs, clock, "10:20", "10:25", tenant="acme")
    clock.set(datetime(2026, 3, 2, 10, 40, tzinfo=UTC))
    rollup.tick(clock)
    auth.as_role("manager", "maria")
    html = client.get("/reports?period=24h").get_data(as_text=True)
    nine = trend_points(html, "2026-03-02T09:00:00+00:00")["Alert latency p95"][0]
    ten = trend_points(html, "2026-03-02T10:00:00+00:00")["Alert latency p50"][0]
    assert "alerted_since=2026-03-02T10:00" in ten and "alerted_until=2026-03-02T11:00" in ten
    assert dlq_rows(client.get(nine).get_data(as_text=True)) == []  # created at 09:58, alerted in the next hour
    listed = client.get(ten).get_data(as_text=True)
    assert dlq_rows(listed) == [str(theirs), str(late)]
    assert "Alert sent from 2026-03-02 10:00 before 2026-03-02 11:00 UTC" in listed
    whole = card(html, "alert_latency_p95_s").group(2).replace("&amp;", "&")
    assert whole == card(html, "alert_latency_p50_s").group(2).replace("&amp;", "&")
    assert dlq_rows(client.get(whole).get_data(as_text=True)) == [str(theirs), str(late)]
    # Removing the chip lists the letters whatever became of their alerts.
    assert "alerted_since" not in re.search(r'<a href="([^"]+)" title="[^"]*">× whenever alerted', listed).group(1)

    # A person limited to a tenant sees only its letters, whichever link they open.
    sam = app.test_client()
    Auth(sam).make_user("sam", "manager", tenant=acme)
    assert Auth(sam).login("sam").status_code == 302
    assert dlq_rows(sam.get(ten).get_data(as_text=True)) == [str(theirs)]
    scoped = trend_points(sam.get("/reports?period=24h").get_data(as_text=True),
                          "2026-03-02T10:00:00+00:00")["Alert latency p50"][0]
    assert "tenant=acme" in scoped and dlq_rows(sam.get(scoped).get_data(as_text=True)) == [str(theirs)]
    assert sam.get(ten + "&tenant=default").status_code == 403


@pytest.mark.parametrize(("query", "message"), [
    ("alerted_since=soon", "alerted_since=soon is not a date and time (YYYY-MM-DDTHH:MM in UTC, or with an offset "
                           "such as +02:00), so it is ignored"),
    ("alerted_until=9999-12-31T23:59", "alerted_until=9999-12-31T23:59 is not between the years 1970 and 9998"),
    ("alerted_since=2026-03-02T10:00&alerted_until=2026-03-02T09:00",
     "&#39;alerted_until&#39; (2026-03-02T09:00) is not after &#39;alerted_since&#39; (2026-03-02T10:00)"),
])
def test_a_bad_alerted_bound_says_what_to_fix(client, auth, query, message):
    auth.as_role("operator")
    refused = client.get(f"/dlq/?view=list&status=any&{query}")
    assert refused.status_code == 422 and message in refused.get_data(as_text=True)


def test_changing_the_period_or_asking_for_dates(manager, client):
    html = client.get("/reports?period=90d").get_data(as_text=True)
    assert "2025-12-03 00:00 – 2026-03-03 00:00 UTC" in html
    # The previous period in words, as sla-report says it (it read "beside the 90 d before", "the 1 d before").
    assert "beside the 90 days before ·" in html
    dated = client.get("/reports?from=2026-03-02&to=2026-03-02").get_data(as_text=True)
    assert "2026-03-02 00:00 – 2026-03-03 00:00 UTC" in dated and "beside the day before ·" in dated
    # ISO dates in text boxes: <input type="date"> would show the browser's locale (03/02/2026).
    assert 'type="text" id="from" name="from" value="2026-03-02" placeholder="YYYY-MM-DD"' in dated
    # The heat map's title counts the tasks that started late, not every task it shows.
    assert "(UTC; the 1 task with the most late starts, then 2 on time)" in html
    # A period not over yet says so (its counts are of the time so far); one in the past does not.
    assert re.search(r"<span data-to-come>not over: 1\d h( \d+ min)? to come", html)
    assert "<span data-to-come>not over: 13 h 59 min to come" in dated
    assert "data-to-come" not in client.get("/reports?from=2026-02-01&to=2026-02-28").get_data(as_text=True)
    # The last 24 hours end at the next whole hour: their counts are of the time so far too (it said nothing).
    assert re.search(r"<span data-to-come>not over: \d+ min to come",
                     client.get("/reports?period=24h").get_data(as_text=True))
    ahead = client.get("/reports?from=2026-03-01&to=2026-03-09").get_data(as_text=True)
    assert re.search(r"<span data-to-come>not over: 7 d 13 h to come", ahead)
    refused = client.get("/reports?from=2026-03-05&to=2026-03-01")
    assert refused.status_code == 422 and "&#39;to&#39; must be on or after &#39;from&#39;" in refused.get_data(
        as_text=True)


def test_the_page_and_its_files_say_which_tenant_and_task_they_cover(manager, client, built):
    assert '<strong data-covers>all tenants</strong>' in client.get("/reports?period=24h").get_data(as_text=True)
    one = client.get(f"/reports?period=24h&tenant=default&task={built['edge']}").get_data(as_text=True)
    assert re.search(r'<strong data-covers>tenant default · task [\w.-]+ \(#\d+\)</strong>', one)
    download = client.get(f"/reports/figures.csv?period=24h&tenant=default&task={built['edge']}")
    name = db.session.get(Task, built["edge"]).name
    assert download.headers["Content-Disposition"].startswith(
        f'attachment; filename="rebound-figures-tenant-default-task-{name}-{built["edge"]}-2026030111-')
    # A task chosen without its tenant is still that tenant's: the file said "all-tenants" (helper 101).
    alone = client.get(f"/reports/figures.csv?period=24h&task={built['edge']}")
    assert f'filename="rebound-figures-tenant-default-task-{name}-' in alone.headers["Content-Disposition"]


@pytest.mark.parametrize("table", ["figures", "trend", "tasks", "heat", "errors", "breaches"])
def test_every_table_downloads_as_csv(manager, client, table):
    response = client.get(f"/reports/{table}.csv?period=24h")
    assert response.status_code == 200 and response.content_type == "text/csv; charset=utf-8"
    assert "attachment" in response.headers["Content-Disposition"]
    # A manager's walk: the definitions' ÷, — and ≥ came out garbled in Excel, which reads UTF-8 only after a BOM.
    assert response.get_data().startswith(b"\xef\xbb\xbf")
    rows = list(csv.reader(io.StringIO(response.get_data().decode("utf-8-sig"))))
    assert len(rows) >= 2, rows
    if table == "figures":
        assert {row[0]: row[2] for row in rows[1:]}["on_time_rate"] == "0.75"
        assert rows[0][-2:] == ["part", "whole"]
        assert {row[0]: row[-2:] for row in rows[1:]}["on_time_rate"] == ["3", "4"]
    if table == "breaches":
        assert rows[1][1] == "start_delay" and rows[1][8] == "1"
    if table == "trend":  # each hour's rates with their counts, which add up to the period's (3 of 4 on time)
        part, whole = rows[0].index("on_time_rate_part"), rows[0].index("on_time_rate_whole")
        assert [sum(int(row[i] or 0) for row in rows[1:]) for i in (part, whole)] == [3, 4]


def test_the_breaches_list_filters_by_kind_and_task(manager, client, built):
    html = client.get(f"/reports/breaches?period=24h&task={built['edge']}").get_data(as_text=True)
    assert "late start" in html and f"/runs/{built['edge_late']}" in html and "1 s" in html
    assert "<strong>1 breach recorded " in html  # all pages together, said above the first
    assert ">Past the limit</th>" in html  # not "How late": the time is counted from the limit, not from due
    # Its times follow the Local time switch like any page's, so their columns name the zone they are in.
    assert re.findall(r'<th[^>]*>(Detected|Due|Limit) \(<span class="tz">UTC</span>\)</th>', html) == [
        "Detected", "Due", "Limit"]
    assert "No SLA breaches" in client.get("/reports/breaches?period=24h&kind=deadline").get_data(as_text=True)


def test_a_heat_map_cell_of_a_task_without_a_start_limit_opens_its_late_runs(manager, client, built):
    """The SLA check records no breach for a task without a start limit, while on time counts its starts over the
    60 s default late: its cells opened "0 breaches recorded" (helper 101)."""
    report = client.get(f"/reports?period=24h&task={built['office']}").get_data(as_text=True)
    figure = json.loads(html_text.unescape(re.search(r'class="heat-chart" data-figure="([^"]*)"', report).group(1)))
    [cells] = figure["data"][0]["customdata"]
    assert len(set(cells)) == 1 and cells[0].startswith(f"/runs?task={built['office']}&") and "&late=1" in cells[0]
    assert client.get(cells[0]).status_code == 200
    breaches = client.get("/reports/breaches?period=24h&kind=start_delay").get_data(as_text=True)
    assert "A task without a start limit (its own SLA or its policy's) has no late-start breaches" in breaches


def test_a_heat_map_cell_opens_the_late_starts_of_its_hour_of_day(manager, client, built):
    report = client.get(f"/reports?period=24h&task={built['edge']}").get_data(as_text=True)
    figure = json.loads(html_text.unescape(re.search(r'class="heat-chart" data-figure="([^"]*)"', report).group(1)))
    [cells] = figure["data"][0]["customdata"]  # one task: a link per hour of day
    assert cells[9] == f"/reports/breaches?period=24h&task={built['edge']}&kind=start_delay&hour=9"
    nine = client.get(f"/reports/breaches?period=24h&task={built['edge']}&kind=start_delay&hour=9")
    html = nine.get_data(as_text=True)
    assert f"/runs/{built['edge_late']}" in html
    assert "Only runs that started between 09:00 and 10:00 UTC, on any day of the period" in html
    assert "hour=9" in re.search(r'href="([^"]*breaches.csv[^"]*)"', html).group(1)  # the CSV is the same list
    ten = client.get(f"/reports/breaches?period=24h&task={built['edge']}&hour=10").get_data(as_text=True)
    assert "No SLA breaches" in ten and f"/runs/{built['edge_late']}" not in ten
    ten_csv = client.get("/reports/breaches.csv?period=24h&hour=10")
    assert len(list(csv.reader(io.StringIO(ten_csv.get_data().decode("utf-8-sig"))))) == 1  # the header only
    assert ten_csv.headers["Content-Disposition"].endswith('-hour10.csv"')  # the file says which hour it holds
    for bad in ("24", "-1", "nine", "9" * 400, "٣"):  # "٣" is 3 to int(), not to a person typing an hour
        refused = client.get(f"/reports/breaches?period=24h&hour={bad}")
        assert refused.status_code == 422 and "hour is an hour of day from 0 to 23 (UTC)" in refused.get_data(
            as_text=True)
        assert client.get(f"/reports/breaches.csv?hour={bad}").status_code == 422
    # A kind that is none was listed as both kinds, as if asked for.
    bogus = client.get("/reports/breaches?period=24h&kind=bogus")
    said = "kind is start_delay or deadline (or leave it out for both), not &#39;bogus"
    assert bogus.status_code == 422 and said in bogus.get_data(as_text=True)
    assert client.get("/reports/breaches.csv?kind=bogus").status_code == 422
    assert client.get("/reports/breaches?period=24h&kind=deadline").status_code == 200


@pytest.mark.parametrize("role", ["viewer", "operator", "approver"])
def test_roles_without_report_get_403_and_no_nav_item(app, client, auth, role):
    auth.as_role(role)
    assert client.get("/reports").status_code == 403
    assert client.get("/reports/tasks.csv").status_code == 403
    assert 'href="/reports"' not in client.get("/overview").get_data(as_text=True)
    # The breaches list is every role's to read, and so is its download (helper 158).
    assert 'href="/reports/breaches.csv?period=7d"' in client.get("/reports/breaches?period=7d").text
    download = client.get("/reports/breaches.csv?period=7d")
    assert download.status_code == 200 and download.mimetype == "text/csv"


def test_a_manager_limited_to_a_tenant_reads_only_it(built, client, auth, clock, monkeypatch):
    monkeypatch.setattr("console.web.reports.views.utcnow", clock)
    acme = make_tenant("acme")
    user = auth.make_user("sam", "manager", tenant=acme)
    auth.login(user.username)
    html = client.get("/reports?period=24h").get_data(as_text=True)
    assert card(html, "dead_letters_created").group(3).count(">0<") == 1
    assert client.get("/reports?period=24h&tenant=default").status_code == 403
    assert client.get("/reports/breaches.csv?tenant=default").status_code == 403


def test_no_operator_button_on_the_reports_pages(manager, client):
    for path in ("/reports?period=24h", "/reports/breaches?period=24h"):
        html = client.get(path).get_data(as_text=True)
        assert not re.search(r"<button[^>]*>\s*(Replay|Cancel|Compensate|Discard|Retry)", html), path
        assert 'method="post"' not in html.replace('action="/logout" method="post"', "").replace(
            'method="post" action="/logout"', "")


def test_the_run_and_task_pages_mark_breaches_and_how_late(built, client, auth, clock, monkeypatch):
    monkeypatch.setattr("console.web.tasks.views.utcnow", clock)
    auth.as_role("viewer")
    run_page = client.get(f"/runs/{built['edge_late']}").get_data(as_text=True)
    assert "late start · 1 s past the limit" in run_page and "Scheduled for" in run_page
    on_time = client.get(f"/runs/{built['edge_late'] - 1}").get_data(as_text=True)
    assert "late start" not in on_time
    task_page = client.get(f"/tasks/{built['edge']}").get_data(as_text=True)
    assert "SLA breaches · last 7 days" in task_page and "1 late start" in task_page
    assert task_page.count("late start · 1 s past the limit") == 1
    assert f'href="/reports/breaches?task={built["edge"]}&amp;period=7d">All breaches' in task_page  # a viewer's too


def test_a_task_pages_latest_breaches_are_of_the_week_it_counts(built, client, auth, clock, monkeypatch):
    monkeypatch.setattr("console.web.tasks.views.utcnow", clock)
    breach = db.session.execute(select(SlaBreach).where(SlaBreach.task_id == built["edge"])).scalar_one()
    old_run = built["edge_late"] - 1
    db.session.add(SlaBreach(task_id=breach.task_id, run_id=old_run, tenant_id=breach.tenant_id, kind="start_delay",
                             late_by_s=99, detected_at=clock() - timedelta(days=9)))
    db.session.commit()
    auth.as_role("viewer")
    task_page = client.get(f"/tasks/{built['edge']}").get_data(as_text=True)
    assert "1 late start" in task_page and "late start · 1 s past the limit" in task_page
    assert f'href="/runs/{old_run}"' not in task_page.split("SLA breaches · last 7 days")[1].split("</div>")[0]


def test_a_run_deferred_into_its_window_shows_when_it_was_due(built, client, auth):
    auth.as_role("viewer")
    office_run = db.session.query(Run).filter_by(task_id=built["office"]).one()
    html = client.get(f"/runs/{office_run.id}").get_data(as_text=True)
    assert "Due (window opens)" in html and "2026-03-02 10:00:00" in html and "late start" not in html


def test_the_overview_shows_runs_per_hour_from_the_rollups_and_its_counters_lead_somewhere(built, client, auth, clock,
                                                                                         monkeypatch):
    monkeypatch.setattr("console.domain.clock.utcnow", clock)
    monkeypatch.setattr("console.web.overview.views.utcnow", clock)
    auth.as_role("manager")
    html = client.get("/overview").get_data(as_text=True)
    raw = re.search(r'id="history-chart" data-figure="([^"]+)"', html).group(1)
    chart = json.loads(raw.replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&").replace("&#39;", "'"))
    succeeded = next(trace for trace in chart["data"] if trace["name"] == "succeeded")
    assert len(succeeded["x"]) == 24 and sum(succeeded["y"]) == 8
    assert succeeded["customdata"][-1].startswith("/runs?created_from=")
    # Its text alternative: the hours with any run, each opening that hour's runs as its bar does.
    table = re.search(r"<summary>As a table<span class=\"visually-hidden\">: runs per hour</span></summary>(.*?)"
                      r"</details>", html, re.S).group(1)
    cells = [[int(n.replace(",", "")) for n in re.findall(r'<td class="num">([\d,]+)</td>', row)]
             for row in re.findall(r"<tr><td class=\"mono\">.*?</tr>", table, re.S)]
    assert cells and sum(row[0] for row in cells) == 8 and all(any(row) for row in cells)
    assert 'aria-hidden="true"' in re.search(r'<div id="history-chart"[^>]*>', html).group(0)
    week = client.get("/overview?history=7d").get_data(as_text=True)
    assert "last 7 days" in week
    assert re.search(r'<a class="counter[^"]*" href="/runs\?status=pending"', html)
    today = f"{clock():%Y-%m-%d}"  # the breaches of today, as the counter counts them, not of the last 24 h
    assert f'href="/reports/breaches?from={today}&amp;to={today}"' in html
    fragment = client.get("/overview", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "history-chart" not in fragment  # the live region does not re-read the history every 5 s


@pytest.mark.parametrize(("query", "field", "message"), [
    ("from=2026-13-45&to=2026-03-01", "from", "from is a date like 2026-03-01"),
    ("from=2026-03-01&to=%FF%FE", "to", "to is a date like 2026-03-01"),
    ("from=2026-03-05", "to", "give both &#39;from&#39; and &#39;to&#39;"),
    ("from=2026-13-45", "from", "from is a date like 2026-03-01"),  # named, not "give both" (helper 101)
    ("from=2024-01-01&to=2026-03-01", "from", "a report covers at most 366 days"),
    ("period=24h&task=99999999999999999999999", "task", "task must be a whole number from 1 to 2,147,483,647"),
    ("from=2026-02-30&to=2026-03-01", "from", "from is a date like 2026-03-01"),
    ("tenant=nosuch", "tenant", "no tenant named &#39;nosuch&#39;"),
    # A second value was dropped without a word: a report of less than was asked (helper 101).
    ("period=24h&task=1&task=2", "task", "give one task, not 2 (1, 2): a report covers one"),
    # The period before year 1's, and the end of 9999's last day, are past what a datetime holds.
    ("from=0001-01-01&to=0001-01-02", "from", "from is a date from 1970-01-01 to 9998-12-31"),
    ("from=9998-12-30&to=9999-12-31", "to", "to is a date from 1970-01-01 to 9998-12-31"),
])
def test_a_bad_period_keeps_the_form_with_the_message_beside_its_field(manager, client, monkeypatch, query, field,
                                                                        message):
    monkeypatch.setattr("console.services.reports.page.build", lambda *a: pytest.fail("figures of a bad period"))
    for path in ("/reports", "/reports/breaches"):
        response = client.get(f"{path}?{query}")
        html = response.get_data(as_text=True)
        assert response.status_code in (404, 422), (path, response.status_code)
        assert '<form class="filters reports-filters no-print"' in html and "report-card" not in html
        control = re.search(rf'<(?:input|select)[^>]* id="{field}"[^>]*>', html).group(0)
        assert 'aria-invalid="true"' in control and f'aria-describedby="{field}-error"' in control, control
        beside = re.search(rf'<div class="field-error" id="{field}-error"[^>]*>([^<]*)</div>', html)
        assert beside and message in beside.group(1), html
        assert 'class="flash error"' not in html  # said once, beside the field
        assert "in this period" not in html  # no period was read: nothing is said about one


@pytest.mark.parametrize("query, status, message", [
    ("from=0001-01-01&to=0001-01-02", 422, "from is a date from 1970-01-01 to 9998-12-31"),
    ("from=9999-12-30&to=9999-12-31", 422, "from is a date from 1970-01-01 to 9998-12-31"),
    ("from=2026-02-30&to=2026-03-01", 422, "from is a date like 2026-03-01"),
    ("period=1y", 422, "period is one of 24h, 7d, 30d, 90d"),
    ("task=99999999999999999999", 422, "task must be a whole number from 1 to 2,147,483,647"),
    ("task=99999", 404, "no task with id 99999"),
    ("tenant=nosuch", 422, "no tenant named 'nosuch'"),
])
@pytest.mark.parametrize("table", ["figures", "tasks", "breaches"])
def test_a_csv_of_a_bad_selection_is_a_plain_sentence(manager, client, table, query, status, message):
    response = client.get(f"/reports/{table}.csv?{query}")
    assert (response.status_code, response.mimetype) == (status, "text/plain")
    assert response.get_data(as_text=True) == message + "\n"
    assert "Content-Disposition" not in response.headers  # said in the browser, not saved as a file


def test_a_breaches_page_past_any_row_id_says_so_and_a_valid_one_pages(manager, client):
    response = client.get("/reports/breaches?period=24h&before=99999999999999999999999")
    assert response.status_code == 422 and "is not a row id" in response.get_data(as_text=True)
    response = client.get(f"/reports/breaches?period=24h&before={2**31 - 1}")
    assert response.status_code == 200 and "late start" in response.get_data(as_text=True)


def test_a_bad_period_name_is_said_beside_the_presets_and_not_sent_again(manager, client):
    html = client.get("/reports?period=bogus").get_data(as_text=True)
    assert re.search(r'<div class="field-error" id="period-error"[^>]*>period is one of 24h, 7d, 30d, 90d</div>', html)
    assert 'name="period" value="bogus"' not in html  # "Show" after picking a tenant does not ask for it again


def test_each_error_fingerprint_opens_the_letters_it_counts_whatever_became_of_them(manager, client):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    rows = re.findall(r'<td><a href="([^"]+)"><span class="error-code">([^<]*)</span></a>.*?<td class="num">(\d+)</td>',
                      html, re.S)
    assert {code for _, code, _ in rows} == {"gateway_down", "ledger_locked"}
    for link, code, letters in rows:
        behind = link.replace("&amp;", "&")
        assert "status=any" in behind and "since=2026-03-01T11:00" in behind and "until=2026-03-02T11:00" in behind
        # The run that died twice left two letters, one replayed: both are counted, so both are listed.
        assert len(dlq_rows(client.get(behind).get_data(as_text=True))) == int(letters) > 0, code
    chart = json.loads(re.search(r'class="bars-chart" data-figure="([^"]+)" aria-hidden="true"></div></div>\s*'
                                 r'<div class="table-wrap">\s*<table class="report-table">\s*<thead><tr><th>Error',
                                 html).group(1)
                       .replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&").replace("&#39;", "'"))
    assert chart["data"][0]["customdata"] == [link.replace("&amp;", "&") for link, _, _ in rows]


def test_a_task_rows_failed_link_lists_the_run_created_before_the_period_whose_series_failed_in_it(
        manager, client, built, clock):
    """The row counts series that ended in the period; its link listed runs created in it, so a replayed old letter
    that died again counted in Failed and was missing behind it (6 shown, 4 listed)."""
    now = clock()
    clock.set(now - timedelta(days=5))
    old = history._adhoc(clock, {"fail_times": 9, "code": "gateway_down"}, handler="demo.flaky_compensated")
    assert execute(old, 0, clock=clock) == "dead"
    clock.set(now)
    control.replay(history._letter(old), history.OPS, clock=clock)
    assert execute(old, 0, clock=clock) == "dead"
    rollup.tick(clock)
    html = client.get("/reports?period=24h").get_data(as_text=True)
    link = re.search(r'<a href="([^"]+)">default / python:demo.flaky_compensated \(no task\)</a>', html).group(1)
    assert run_rows(client.get(link.replace("&amp;", "&")).get_data(as_text=True)) == {old}


def test_a_handler_row_without_a_task_opens_that_handlers_failed_runs_only(manager, client, built, clock):
    # Runs a text search for the handler would also find: a longer handler's, and a task's run of the same handler.
    longer = history._adhoc(clock, {"fail_times": 9}, handler="demo.flaky_compensated")
    assert execute(longer, 0, clock=clock) == "dead"
    flaky_task = tasks.register(tenants.find("default"), {"name": "flaky-task", "handler": "demo.flaky",
                                                          "cron": "0 0 1 1 *", "params": {"error": "fatal"}},
                                history.OPS)
    tasked = history.fire(flaky_task, clock())
    assert execute(tasked, 0, clock=clock) == "dead"
    rollup.tick(clock)
    html = client.get("/reports?period=24h").get_data(as_text=True)
    assert "so a run that died twice counts 2 here and is listed once" in html  # the Failed column counts series
    link = re.search(r'<a href="([^"]+)">default / python:demo.flaky \(no task\)</a>', html).group(1)
    behind = link.replace("&amp;", "&")
    assert "handler=python:demo.flaky" in behind and "q=" not in behind
    listed = client.get(behind).get_data(as_text=True)
    assert run_rows(listed) == {built["twice_dead"], built["recovered"]}
    assert "Handler python:demo.flaky, submitted without a task" in listed
    # The note can be removed; the text box stays for people's words.
    assert 'name="q" placeholder="e.g. ledger" type="search" value=""' in listed
    # Its Dead letters cell opens the letters it counts: not the task's letter of the same handler too.
    row = html[html.index(">default / python:demo.flaky (no task)</a>"):]
    row = row[:row.index("</tr>")]
    cell = re.search(r'href="(/dlq/[^"]+)">(\d+)</a>', row)
    letters = client.get(cell.group(1).replace("&amp;", "&")).get_data(as_text=True)
    assert len(dlq_rows(letters)) == int(cell.group(2)) and f"run {tasked}" not in letters
    assert "python:demo.flaky without a task</option>" in letters


@pytest.mark.parametrize(("query", "message"), [
    ("handler=" + "x" * 121, "Field cannot be longer than 120 characters"),
    ("handler=python:demo.flaky&task=1", "a handler&#39;s runs without a task: drop the task"),
])
def test_a_handler_filter_that_can_match_nothing_says_why(manager, client, query, message):
    response = client.get(f"/runs?{query}")
    assert response.status_code == 422 and message in response.get_data(as_text=True)


def trend_points(html: str, hour: str) -> dict[str, tuple[str, float | None]]:
    """Each trend chart's point at one hour: {figure label: (link, value)}."""
    found = {}
    for label, raw in re.findall(r'<div class="trend-head"><span title="[^"]*">([^<]+)</span>.*?data-figure="([^"]+)"',
                                 html, re.S):
        [line, *_] = json.loads(raw.replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&")
                                .replace("&#39;", "'"))["data"]
        at = line["x"].index(hour)
        found[label] = (line["customdata"][at], line["y"][at])
    return found


def test_each_trend_point_opens_what_its_figure_counts_in_that_hour(manager, client, built):
    html = client.get("/reports?period=24h").get_data(as_text=True)
    points = trend_points(html, "2026-03-02T09:00:00+00:00")
    hour = ("2026-03-02T09:00", "2026-03-02T10:00")

    def behind(label: str) -> str:
        return points[label][0]

    def spans(link: str, since: str, until: str) -> bool:
        return f"{since}={hour[0]}" in link and f"{until}={hour[1]}" in link

    created = behind("Dead letters created")
    assert created.startswith("/dlq/") and "status=any" in created and spans(created, "since", "until")
    assert len(dlq_rows(client.get(created).get_data(as_text=True))) == points["Dead letters created"][1] == 3
    alerted = behind("Alert latency p50")
    assert alerted == behind("Alert latency p95") and spans(alerted, "alerted_since", "alerted_until")
    assert len(dlq_rows(client.get(alerted).get_data(as_text=True))) == 3  # each letter's alert went out in the hour
    recovered = behind("Dead letters recovered")
    assert recovered.startswith("/dlq/") and spans(recovered, "recovered_since", "recovered_until")
    assert len(dlq_rows(client.get(recovered).get_data(as_text=True))) == points["Dead letters recovered"][1] == 1
    assert behind("Time to recover p50") == behind("Time to recover p90") == recovered
    breaches = behind("SLA breaches")
    assert breaches.startswith("/reports/breaches?") and spans(breaches, "since", "until")
    listed = client.get(breaches).get_data(as_text=True)
    assert f"/runs/{built['edge_late']}" in listed
    assert "1 breach recorded 2026-03-02 09:00 – 2026-03-02 10:00 UTC" in listed
    late = behind("Scheduling on time")
    assert late.startswith("/reports/breaches?") and "kind=start_delay" in late and spans(late, "since", "until")
    assert behind("Trigger delay p99") == late
    orders = behind("Work orders completed")
    assert orders.startswith("/workorders?") and spans(orders, "since", "until")
    assert client.get(orders).status_code == 200
    conflicts = behind("Conflict early warning")
    assert "conflicted=1" in conflicts and spans(conflicts, "created_from", "created_to")
    assert run_rows(client.get(conflicts).get_data(as_text=True)) == {built["office_run"], built["forbidden"]}
    assert "failed=1" in behind("Execution success") and "retried=1" in behind("Automatic retry success")
    assert "duplicated=1" in behind("Duplicate execution")


def test_a_span_of_minutes_is_read_whole_and_a_preset_or_show_drops_it(manager, client):
    html = client.get("/reports/breaches?period=24h&since=2026-03-02T09:00&until=2026-03-02T10:00").get_data(
        as_text=True)
    assert 'href="/reports/breaches?period=7d"' in html and 'name="since"' not in html
    for query, message in (("since=2026-03-02T10:00&until=2026-03-02T09:00", "&#39;until&#39; must be after"),
                           ("since=2026-03-02T09:00", "give both &#39;since&#39; and &#39;until&#39;"),
                           ("until=9am", "until is a UTC time like 2026-03-01T09:00"),
                           ("since=soon&until=2026-03-02T09:00", "since is a UTC time like 2026-03-01T09:00")):
        response = client.get(f"/reports/breaches?{query}")
        assert response.status_code == 422 and message in response.get_data(as_text=True), query


def test_a_missed_deadline_shows_its_deadline_so_due_plus_limit_plus_lateness_add_up(manager, client, clock):
    timed = tasks.register(tenants.find("default"), {"name": "timed", "handler": "demo.noop", "cron": "0 0 1 1 *",
                                                     "sla": {"deadline_s": 5}}, history.OPS)
    due = clock().replace(minute=13, second=0)
    run = history.fire(timed, due)
    clock.set(due + timedelta(seconds=15))  # succeeded 15 s after it was due: 10 s past its 5 s deadline
    assert execute(run, 0, clock=clock) == "succeeded"
    sla.check(clock)
    db.session.query(SlaBreach).filter(SlaBreach.kind == "deadline").update({"escalated": True})  # as a third would be
    db.session.commit()
    html = client.get("/reports/breaches?period=24h&kind=deadline").get_data(as_text=True)
    row = re.search(r"<tr>\s*<td[^>]*>(?:(?!</tr>).)*missed deadline(?:(?!</tr>).)*</tr>", html, re.S).group(0)
    assert re.search(r"missed deadline</span> <span [^>]*>escalated</span>", row), row  # beside its kind
    cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    # The limit on the day it was due shows its clock only; the title keeps the whole moment.
    assert cells[4:7] == ["2026-03-02 10:13:00", "10:13:05 (deadline 5 s)", "10 s"], cells
    assert 'title="2026-03-02T10:13:05+00:00">10:13:05</time>' in row
    late = client.get("/reports/breaches?period=24h&kind=start_delay").get_data(as_text=True)
    assert re.search(r"2026-03-02 09:20:00\s*</time>\s*</td>\s*<td>.*?>09:21:00</time></span> <span[^>]*>"
                     r"\(start within 1 min\)", late, re.S), late
    download = client.get("/reports/breaches.csv?period=24h&kind=deadline").get_data().decode("utf-8-sig")
    header, first = list(csv.reader(io.StringIO(download)))[:2]
    assert dict(zip(header, first, strict=True))["limit_at"] == "2026-03-02T10:13:05+00:00"


def test_the_task_choices_are_the_chosen_tenants(manager, client, built):
    acme = make_tenant("acme")
    tasks.register(acme, {"name": "acme-sync", "handler": "demo.noop", "cron": "0 0 1 1 *"}, history.OPS)

    def offered(query: str) -> set[str]:
        html = client.get(f"/reports?{query}").get_data(as_text=True)
        select = re.search(r'<select id="task" name="task"[^>]*>(.*?)</select>', html, re.S).group(1)
        return {label.strip() for label in re.findall(r"<option [^>]*>([^<]+)</option>", select)} - {"all tasks"}

    assert {"acme / acme-sync", "default / edge"} <= offered("period=24h")
    assert offered("period=24h&tenant=acme") == {"acme / acme-sync"}
    assert "acme / acme-sync" not in offered("period=24h&tenant=default")
    # A task of another tenant is refused beside the field, which offers the chosen tenant's tasks to pick from.
    refused = client.get(f"/reports?period=24h&tenant=acme&task={built['edge']}")
    assert refused.status_code == 422 and ("task default / edge is tenant default&#39;s, not acme&#39;s: choose one "
                                           "of acme&#39;s tasks, or all tasks") in refused.get_data(as_text=True)
    assert offered(f"period=24h&tenant=acme&task={built['edge']}") == {"acme / acme-sync"}


def workorder_rows(html: str) -> set[int]:
    return {int(order_id) for order_id in re.findall(r'<tr id="wo-row-(\d+)"', html)}


def test_work_orders_completed_of_one_task_opens_that_tasks_work_orders_not_everyones(manager, client, built, clock):
    boom = tasks.register(tenants.find("default"), {"name": "boom", "handler": "demo.flaky", "cron": "0 0 1 1 *",
                                                    "params": {"error": "fatal", "code": "boom"}}, history.OPS)
    run = history.fire(boom, clock())
    assert execute(run, 0, clock=clock) == "dead"
    rollup.tick(clock)
    boom_order = db.session.query(DeadLetter).filter_by(run_id=run).one().work_order_id
    for task_id, expected, shown in ((built["edge"], set(), "—"), (boom.id, {boom_order}, "0.0 %")):
        html = client.get(f"/reports?period=24h&task={task_id}").get_data(as_text=True)
        orders = card(html, "workorder_completion_rate")
        assert shown in orders.group(3)
        behind = orders.group(2).replace("&amp;", "&")
        assert f"task={task_id}" in behind
        listed = client.get(behind).get_data(as_text=True)
        assert workorder_rows(listed) == expected  # not every work order of the period
        assert f"with a dead letter of task #{task_id}" in listed
    for bad in ("abc", "0", "99999999999999999999", "987654"):  # the last: no such task (another tenant's reads so)
        assert client.get(f"/workorders?task={bad}").status_code == 422, bad
    assert "no task with id 987654 that you can see" in client.get("/workorders?task=987654").get_data(as_text=True)


@pytest.mark.parametrize("period", ["24h", "7d"])
def test_the_work_orders_completed_trend_has_the_points_its_card_counts(manager, client, period):
    html = client.get(f"/reports?period={period}").get_data(as_text=True)
    assert "50.0 %" in card(html, "workorder_completion_rate").group(3)
    [(label, raw)] = [(label, raw) for label, raw in re.findall(
        r'<div class="trend-head"><span title="[^"]*">([^<]+)</span>.*?data-figure="([^"]+)"', html, re.S)
        if label == "Work orders completed"]
    line = json.loads(raw.replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&"))["data"][0]
    # Both work orders were opened at 09:xx on 2026-03-02: one closed now, one open.
    points = {x: y for x, y in zip(line["x"], line["y"], strict=True) if y is not None}
    day_or_hour = "2026-03-02T09:00:00+00:00" if period == "24h" else "2026-03-02T00:00:00+00:00"
    assert points == {day_or_hour: 50.0}


def test_a_chart_points_span_says_so_and_offers_the_whole_period(manager, client):
    html = client.get("/reports/breaches?period=24h&kind=deadline&since=2026-03-02T09:00&until=2026-03-02T10:00"
                      ).get_data(as_text=True)
    assert "Only the span of the chart point you opened." in html
    assert 'href="/reports/breaches?period=24h&amp;kind=deadline">Show the whole period</a>' in html
    assert "Only the span" not in client.get("/reports/breaches?period=24h").get_data(as_text=True)


def test_a_csv_cell_a_spreadsheet_would_run_as_a_formula_is_written_as_text(manager, client):
    # Error codes and messages come from callers (POST /events, a handler's exception): never trusted as cells.
    db.session.execute(update(report_error_hours).values(error_code='=HYPERLINK("http://evil.example","open")',
                                                         message="@SUM(1+1)"))
    db.session.commit()
    rows = list(csv.reader(io.StringIO(client.get("/reports/errors.csv?period=24h").get_data().decode("utf-8-sig"))))
    assert rows[1][1:3] == ['\'=HYPERLINK("http://evil.example","open")', "'@SUM(1+1)"]
    assert all(row[3].isdigit() for row in rows[1:])  # numbers are numbers still
    figures = list(csv.reader(io.StringIO(client.get("/reports/trend.csv?period=24h").get_data().decode(
        "utf-8-sig"))))
    assert not any(cell.startswith("'") for row in figures for cell in row)


def test_the_tasks_table_says_when_it_shows_only_the_first_15_and_where_the_rest_are(manager, client, monkeypatch):
    shown = client.get("/reports?period=24h").get_data(as_text=True)
    assert "Tasks, most failures first" in shown and "data-cut" not in shown  # all of them fit
    every = page.task_rows
    monkeypatch.setattr(page, "task_rows", lambda period, scope: every(period, scope) * 20)
    cut = client.get("/reports?period=24h").get_data(as_text=True)
    said = re.search(r"<p class=\"subtle\" data-cut>(.*?)</p>", cut, re.S).group(1)
    # Rows are tasks and handlers run without one: it called all of them tasks.
    counted = re.fullmatch(r"The 15 with the most failures of (\d+) rows \((\d+) tasks?, (\d+) handlers? run without "
                           r"a task\); all \1 in the CSV\.", re.sub(r"<[^>]+>", "", said))
    assert counted and int(counted.group(1)) % 20 == 0 and int(counted.group(1)) > 15
    assert int(counted.group(2)) + int(counted.group(3)) == int(counted.group(1)) and int(counted.group(3)) > 0
    assert 'href="/reports/tasks.csv?period=24h"' in said
