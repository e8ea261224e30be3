"""The Runs area: find runs, read one run's whole timeline, retry or cancel it, and see many on a Gantt."""

import html
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select

from console.domain.breaker import BreakerSettings
from console.domain.clock import utcnow
from console.domain.cron import jitter_offset
from console.extensions import db
from console.models import AuditEntry, DeadLetter, Task, Tenant
from console.services.actor import Actor
from console.services.engine import breakers
from console.services.engine.execute import execute
from console.services.people import tenants
from console.services.runs import query as runs_query
from console.services.runs import timeline as run_timeline
from console.services.runs.query import RunFilters
from console.services.scheduling import planner, tasks
from tests.factories import Runs, bearer

ROW_ID = re.compile(r'<td class="num mono"><a href="/runs/(\d+)">')
FLAKY_ONCE = {"fail_times": 1, "message": "lock wait timeout on ledger row"}
FATAL = {"fail_times": 9, "error": "fatal", "code": "invalid_account", "message": "account 1000 is closed"}


@pytest.fixture
def runs(app):
    return Runs()


def tenant(name: str) -> Tenant:
    row = Tenant(name=name)
    db.session.add(row)
    db.session.commit()
    return row


def listed(response) -> list[int]:
    """Return the run ids of a Runs list page, in the order shown."""
    return [int(i) for i in ROW_ID.findall(response.get_data(as_text=True))]


def retried_to_success(runs, clock) -> int:
    """Submit demo.flaky failing once, and execute it twice: retry_wait, then succeeded."""
    run_id = runs.submit("demo.flaky", FLAKY_ONCE, clock=clock)
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    clock.set(runs.get(run_id).next_retry_at)
    assert execute(run_id, 1, clock=clock) == "succeeded"
    return run_id


def dead_run(runs, clock, **kwargs) -> int:
    run_id = runs.submit("demo.flaky", FATAL, clock=clock, **kwargs)
    assert execute(run_id, 0, clock=clock) == "dead"
    return run_id


def audit_rows(action: str, run_id: int) -> list[AuditEntry]:
    db.session.expire_all()
    return db.session.execute(select(AuditEntry).where(AuditEntry.action == action,
                                                       AuditEntry.target_id == str(run_id))).scalars().all()


def htmx_post(client, auth, path: str, run_id: int):
    token = auth.csrf(f"/runs/{run_id}")
    return client.post(path, headers={"HX-Request": "true", "X-CSRFToken": token})


# ---- the list ----

def test_filters_by_status_tenant_error_code_and_text(client, auth, runs, clock):
    tenant("acme")
    waiting = runs.submit("demo.noop", tenant="acme", idempotency_key="order-4711", clock=clock)
    dead = dead_run(runs, clock)
    retrying = runs.submit("demo.flaky", FLAKY_ONCE, clock=clock)
    execute(retrying, 0, clock=clock)
    auth.as_role("viewer")

    assert listed(client.get("/runs")) == [retrying, dead, waiting]
    assert listed(client.get("/runs?status=dead")) == [dead]
    assert listed(client.get("/runs?status=dead&status=retry_wait")) == [retrying, dead]
    assert listed(client.get("/runs?tenant=acme")) == [waiting]
    assert listed(client.get("/runs?tenant=default&status=pending")) == []
    assert listed(client.get("/runs?error_code=invalid_account")) == [dead]
    assert listed(client.get("/runs?error_code=flaky")) == [retrying]
    # Text matches the idempotency key, the error message or the handler, case-insensitively.
    assert listed(client.get("/runs?q=ORDER-47")) == [waiting]
    assert listed(client.get("/runs?q=ledger")) == [retrying]
    assert listed(client.get("/runs?q=flaky")) == [retrying, dead]
    assert listed(client.get("/runs?q=flaky&status=dead")) == [dead]
    # LIKE wildcards in the text are taken literally.
    assert listed(client.get("/runs?q=%25")) == []
    empty = client.get("/runs?q=nothing-like-this").get_data(as_text=True)
    assert "No runs match these filters" in empty


def test_the_error_code_filter_finds_a_code_whatever_its_case(client, auth, runs, clock):
    # Codes are stored as handlers raise them: exception names, a handler's own words, an executor's report.
    lower = dead_run(runs, clock)  # invalid_account
    upper = runs.submit("demo.flaky", {**FATAL, "code": "TIMEOUT"}, clock=clock)
    assert execute(upper, 0, clock=clock) == "dead"
    auth.as_role("viewer")
    assert listed(client.get("/runs?error_code=INVALID_ACCOUNT")) == [lower]
    assert listed(client.get("/runs?error_code=timeout")) == [upper]
    assert listed(client.get("/runs?error_code=TimeOut")) == [upper]
    assert 'data-total="1"' in client.get("/runs?error_code=timeout").get_data(as_text=True)
    assert listed(client.get("/runs?code=timeout")) == [upper]  # the DLQ's and the API's name for it


def test_a_bad_filter_is_a_422_that_names_the_field(client, auth, runs):
    runs.submit()
    auth.as_role("viewer")
    response = client.get("/runs?created_from=yesterday")
    assert response.status_code == 422
    body = response.get_data(as_text=True)
    assert "Fix the filter" in body and "Created from (UTC)" in body and listed(response) == []
    assert client.get("/runs?status=exploded").status_code == 422
    assert client.get("/runs?created_from=2026-01-05T10:00&created_to=2026-01-05T09:00").status_code == 422


@pytest.mark.parametrize("path", ["/runs", "/runs/timeline"])
def test_a_task_the_person_cannot_see_is_no_task_with_that_id(client, auth, path):
    globex, acme = tenant("globex"), tenant("acme")
    theirs = tasks.register(acme, {"name": "acme nightly", "handler": "demo.noop", "cron": "0 3 * * *"}, Actor("t"))
    own = tasks.register(globex, {"name": "globex nightly", "handler": "demo.noop", "cron": "0 3 * * *"}, Actor("t"))
    auth.make_user("gina", "operator", tenant=globex)
    auth.login("gina")
    assert client.get(f"{path}?task={own.id}").status_code == 200
    for task in (theirs.id, "99999999999999999999", "0", "abc"):
        refused = client.get(f"{path}?task={task}&late=1")  # late starts look up the task's start limit
        body = refused.get_data(as_text=True)
        assert refused.status_code == 422 and f"Task: no task with id {task} that you can see" in body, body
        assert "Not a valid choice" not in body and "acme" not in body  # the other tenant's task is not told apart


def test_a_task_past_the_filters_first_five_hundred_is_still_a_filter(client, auth):
    """A task page's runs link names its task by id: with more tasks than the Task list offers, it was refused (and
    the report's select showed all tasks while the report was the task's)."""
    default = tenants.find("default")
    db.session.execute(insert(Task), [{"tenant_id": default.id, "name": f"a{n:03}", "handler": "python:demo.noop",
                                       "event": f"e{n}"} for n in range(500)])
    last = tasks.register(default, {"name": "zz last", "handler": "demo.noop", "event": "zz"}, Actor("t"))
    auth.as_role("manager")  # who reads reports
    for path in ("/runs", "/runs/timeline"):
        shown = client.get(f"{path}?task={last.id}")
        assert shown.status_code == 200, shown.get_data(as_text=True)[-600:]
        assert f'<option selected value="{last.id}">' in shown.get_data(as_text=True)
    assert client.get("/runs?task=999999").status_code == 422
    report = client.get(f"/reports/?task={last.id}").get_data(as_text=True)  # its select showed "all tasks"
    assert f'<option value="{last.id}" data-tenant="default" selected>' in report


def test_created_time_range_filters_by_created_at(client, auth, runs, clock):
    early = runs.submit(clock=clock)
    clock.advance(3600)
    late = runs.submit(clock=clock)
    auth.as_role("viewer")
    assert listed(client.get("/runs?created_from=2026-01-05T09:30")) == [late]
    assert listed(client.get("/runs?created_to=2026-01-05T09:30")) == [early]
    assert listed(client.get("/runs?created_from=2026-01-05T08:00&created_to=2026-01-05T11:00")) == [late, early]


def test_a_created_date_alone_means_that_whole_day(client, auth, runs, clock):
    clock.set(clock().replace(day=4, hour=23, minute=59))
    eve = runs.submit(clock=clock)
    clock.advance(60)
    midnight = runs.submit(clock=clock)  # 2026-01-05 00:00
    clock.set(clock().replace(hour=23, minute=59, second=59))
    last = runs.submit(clock=clock)
    clock.advance(1)
    next_day = runs.submit(clock=clock)  # 2026-01-06 00:00
    auth.as_role("viewer")
    assert listed(client.get("/runs?created_from=2026-01-05")) == [next_day, last, midnight]
    # The upper bound is exclusive for a time; a date alone counts that day to its end, as Reports' "to" does.
    assert listed(client.get("/runs?created_to=2026-01-05")) == [last, midnight, eve]
    one_day = client.get("/runs?created_from=2026-01-05&created_to=2026-01-05")
    assert one_day.status_code == 200 and listed(one_day) == [last, midnight]
    assert 'value="2026-01-05"' in one_day.get_data(as_text=True)  # shown as typed, not as the next midnight
    assert listed(client.get("/runs?created_to=2026-01-05 00:00")) == [eve]
    gantt = client.get("/runs/timeline?created_from=2026-01-05&created_to=2026-01-05")
    assert gantt.status_code == 200 and 'value="2026-01-05"' in gantt.get_data(as_text=True)
    # Two runs a day: the axis spans their bars, and the page says it does not draw the day asked.
    assert "The time axis spans the bars, not the whole window" in gantt.get_data(as_text=True)
    for garbage in ("2026-02-30", "2026-13", "yesterday", "9999-12-31", "0001-01-01", "2026-01-05T25:00"):
        for path in ("/runs", "/runs/timeline"):
            refused = client.get(f"{path}?created_to={garbage}")
            assert refused.status_code == 422 and "Fix the filter" in refused.get_data(as_text=True), (path, garbage)
    assert client.get("/runs/timeline?created_from=9999-12-31 23:30").status_code == 422  # no window past year 9999


def test_keyset_pagination_walks_two_pages_and_only_the_first_one_polls(client, auth, runs):
    ids = [runs.submit() for _ in range(60)]
    auth.as_role("viewer")
    first = client.get("/runs")
    first_ids = listed(first)
    assert first_ids == sorted(ids, reverse=True)[:50]
    body = first.get_data(as_text=True)
    assert 'hx-trigger="every 5s"' in body
    older = re.search(r'href="(/runs\?before=(\d+)[^"]*)"', body)
    assert older and int(older.group(2)) == first_ids[-1]
    second = client.get(html.unescape(older.group(1)))
    assert listed(second) == sorted(ids, reverse=True)[50:]
    second_body = second.get_data(as_text=True)
    assert "before=" not in second_body.split('class="pager"')[1] and 'hx-trigger="every 5s"' not in second_body
    assert "← Newest" in second_body


def test_pagination_keeps_the_filters(client, auth, runs, clock):
    tenant("acme")
    acme = [runs.submit(tenant="acme") for _ in range(52)]
    runs.submit()
    auth.as_role("viewer")
    body = client.get("/runs?tenant=acme").get_data(as_text=True)
    link = html.unescape(re.search(r'href="(/runs\?before=[^"]+)"', body).group(1))
    assert "tenant=acme" in link
    assert listed(client.get(link)) == sorted(acme, reverse=True)[50:]


def test_a_time_range_pages_through_created_at_order_without_losing_ties(client, auth, runs, clock):
    # Twenty runs share each second, so the keyset must break ties on the id.
    ids = []
    for _ in range(3):
        ids += [runs.submit(clock=clock) for _ in range(20)]
        clock.advance(1)
    auth.as_role("viewer")
    first = client.get("/runs?created_from=2026-01-05T08:00&created_to=2026-01-05T10:00")
    body = first.get_data(as_text=True)
    link = html.unescape(re.search(r'href="(/runs\?before=[^"]+)"', body).group(1))
    assert "created_from=2026-01-05T08%3A00" in link or "created_from=2026-01-05T08:00" in link
    second = client.get(link)
    assert listed(first) + listed(second) == sorted(ids, reverse=True)
    assert 'class="pager"' in second.get_data(as_text=True) and "before=" not in second.get_data(
        as_text=True).split('class="pager"')[1]


def test_text_finds_a_run_by_a_value_of_its_params_but_never_by_a_secret(client, auth, runs, clock):
    # An on-call engineer holds a customer's email or an order id; it was in no column the search read (helper 136).
    ours = runs.submit("demo.noop", {"email": "Bob1@Example.com", "city": "Zürich", "api_key": "sk_live_7f3a9q"},
                       clock=clock)
    runs.submit("demo.noop", {"email": "carol@example.com"}, clock=clock)
    auth.as_role("viewer")
    assert listed(client.get("/runs?q=bob1@example")) == [ours]
    assert listed(client.get("/runs?q=zürich")) == [ours]  # stored as JSON writes it: \u00fc
    assert listed(client.get("/runs?q=ZÜRICH")) == [ours]  # SQLite folds ASCII only (helper 141)
    # Every page masks it: listing the run would confirm a guessed token.
    assert listed(client.get("/runs?q=sk_live_7f3a9q")) == []
    assert [run["id"] for run in client.get("/api/runs?q=sk_live_7f3a9q", headers=bearer(
        auth.make_user("svc", "operator"))).json["runs"]] == []


def test_a_run_put_off_by_a_limit_says_which_in_the_list(client, auth, runs, clock):
    # The list read "pending · due 18:25:52": why, only on each run's own page (helper 136).
    run_id = runs.submit(clock=clock)
    run = runs.get(run_id)
    run.wait_reason = "tenant quota: tenant default is running 1 of its max_running 1"
    db.session.commit()
    auth.as_role("viewer")
    page = client.get("/runs").get_data(as_text=True)
    assert '<span title="tenant quota: tenant default is running 1 of its max_running 1">tenant quota</span>' in page


def test_a_search_for_a_runs_number_names_that_run(client, auth, runs, clock):
    tenant("acme")
    ours, theirs = runs.submit(clock=clock), runs.submit(tenant="acme", clock=clock)
    auth.as_role("viewer")
    page = client.get(f"/runs?q=%23{ours}").get_data(as_text=True)
    assert re.search(rf'data-named-run>Run <a href="/runs/{ours}"><strong>#{ours}</strong></a>', page)
    assert "data-named-run" not in client.get("/runs?q=99999999").get_data(as_text=True)
    assert "data-named-run" not in client.get("/runs?q=" + "9" * 30).get_data(as_text=True)
    assert runs_query.page(RunFilters(text=str(theirs)), scope=tenants.find("default").id).named_run is None
    assert runs_query.page(RunFilters(text=str(theirs)), scope=None).named_run == theirs


def test_text_search_reads_a_bounded_window_of_ids_then_offers_to_go_on(app, runs):
    match_old = runs.submit(idempotency_key="needle-1")
    filler = [runs.submit() for _ in range(10)]
    match_new = runs.submit(idempotency_key="needle-2")
    found = runs_query.page(RunFilters(text="needle"), scope=None, text_window=4)
    assert [r.id for r in found.runs] == [match_new]
    low = match_new + 1 - 4
    assert found.searched == (low, match_new) and found.next_before == low
    on = runs_query.page(RunFilters(text="needle"), scope=None, before=found.next_before, text_window=4)
    assert on.runs == [] and on.next_before == low - 4
    last = runs_query.page(RunFilters(text="needle"), scope=None, before=on.next_before, text_window=4)
    assert [r.id for r in last.runs] == [match_old] and last.next_before is None
    assert filler[0] > match_old


def test_htmx_requests_get_only_the_fragment(client, auth, runs, clock):
    run_id = runs.submit(clock=clock)
    auth.as_role("viewer")
    headers = {"HX-Request": "true"}
    listing = client.get("/runs?status=pending", headers=headers).get_data(as_text=True)
    assert listing.lstrip().startswith('<div id="results"') and "<html" not in listing
    assert f'href="/runs/{run_id}"' in listing and 'hx-get="/runs?status=pending"' in listing
    detail = client.get(f"/runs/{run_id}", headers=headers).get_data(as_text=True)
    assert detail.lstrip().startswith('<div id="run-detail"') and "<html" not in detail
    chart = client.get("/runs/timeline", headers=headers).get_data(as_text=True)
    assert chart.lstrip().startswith('<div id="chart"') and "<html" not in chart
    full = client.get("/runs").get_data(as_text=True)
    assert "<html" in full and 'hx-push-url="true"' in full


# ---- one run ----

def test_run_page_shows_every_event_of_a_retried_run(client, auth, runs, clock):
    run_id = retried_to_success(runs, clock)
    events = runs.events(run_id)
    assert [e.kind for e in events] == ["submitted", "running", "retry_wait", "pending", "running", "succeeded"]
    auth.as_role("viewer")
    body = client.get(f"/runs/{run_id}").get_data(as_text=True)
    timeline = body.split('<table class="timeline">')[1]
    rows = re.findall(r'<tr class="ev-([a-z_]+)">', timeline)
    assert rows == [e.kind for e in events]
    run = runs.get(run_id)
    for token in {e.retry_token for e in events if e.retry_token}:
        assert f'<code title="{token}">{token[:8]}…</code>' in timeline
    assert "flaky" in timeline and "lock wait timeout on ledger row" in timeline
    assert f"{events[2].next_retry_at:%H:%M:%S}" in timeline and "retryable" in timeline and "timer" in timeline
    assert run.idempotency_key in body and run.trace_id in body and "demo.flaky" in body
    assert "&#34;succeeded_on_execution&#34;: 2" in body and "&#34;fail_times&#34;: 1" in body
    assert "6 events, oldest first" in body


def test_run_page_polls_while_waiting_and_stops_once_succeeded(client, auth, runs, clock):
    run_id = runs.submit("demo.flaky", FLAKY_ONCE, clock=clock)
    execute(run_id, 0, clock=clock)
    auth.as_role("viewer")
    waiting = client.get(f"/runs/{run_id}", headers={"HX-Request": "true"}).get_data(as_text=True)
    opening = waiting[:waiting.index(">")]
    assert 'hx-trigger="every 2s"' in opening and f'hx-get="/runs/{run_id}"' in opening
    assert "retry wait" in waiting
    clock.set(runs.get(run_id).next_retry_at)
    execute(run_id, 1, clock=clock)
    done = client.get(f"/runs/{run_id}", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "hx-trigger" not in done and "hx-get" not in done[:done.index(">")]
    assert "badge succeeded" in done


def test_an_unknown_run_is_a_404(client, auth):
    auth.as_role("viewer")
    assert client.get("/runs/999999").status_code == 404


# ---- actions ----

def test_replay_on_a_dead_run_starts_series_two_and_is_audited(client, auth, runs, clock):
    run_id = dead_run(runs, clock)
    auth.as_role("operator", "olga")
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert ">Replay</button>" in page and "Retry now" not in page
    assert "hx-confirm=" in page and f'action="/runs/{run_id}/retry"' in page
    assert f'action="/runs/{run_id}/cancel"' not in page  # a dead run cannot be cancelled
    # Or it needs no replay: Resolve… opens the four-eyes runbook with the run filled in.
    resolve = re.search(r'<a class="button secondary" href="([^"]+)"[^>]*>Resolve…</a>', page)
    assert resolve and resolve.group(1) == f"/runbooks/resolve_runs?runs={run_id}&amp;tenant=default"
    form = client.get(resolve.group(1).replace("&amp;", "&")).get_data(as_text=True)
    assert re.search(rf'<input[^>]*id="runs"[^>]*value="{run_id}"', form)
    assert '<option selected value="default">' in form  # the approver reads the one tenant it acts on
    response = client.post(f"/runs/{run_id}/retry", data={"csrf_token": auth.csrf(f"/runs/{run_id}")})
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/runs/{run_id}")
    run = runs.get(run_id)
    assert (run.status, run.series, run.attempt, run.status_reason) == ("pending", 2, 0, "manual_retry")
    [entry] = audit_rows("run.retry", run_id)
    assert entry.actor == "olga" and entry.before["status"] == "dead" and entry.after == {
        "status": "pending", "series": 2, "policy_id": run.policy_id, "policy_overrides": {}}
    [letter] = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)).scalars().all()
    assert letter.status == "replayed" and letter.resolved_by == "olga"
    followed = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Replayed run #" in followed and "series 2" in followed


def fact(body: str, term: str) -> str:
    """Return the words of one fact in the run page's head (its <dd>, markup taken out)."""
    found = re.search(rf"<dt>{term}</dt><dd>(.*?)</dd>", body, re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip() if found else ""


# Cells of the runs list: #, Status (and progress), Tenant, Task / handler, Att., Created, Started, Finished, …
STATUS, STARTED, DURATION = 1, 6, 8


def list_row(client, run_id: int) -> list[str]:
    """The runs list's cells for one run, as text."""
    html = client.get("/runs").get_data(as_text=True)
    row = re.search(rf'<tr>\s*<td class="num mono"><a href="/runs/{run_id}">.*?</tr>', html, re.S).group(0)
    return [" ".join(re.sub(r"<[^>]+>", " ", cell).split()) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_a_replayed_run_waiting_in_series_two_shows_it_has_not_started(client, auth, runs, clock):
    run_id = runs.submit("demo.flaky", FATAL, clock=clock)
    assert execute(run_id, 0, clock=clock, worker_id="worker-a") == "dead"
    first_start = f"{runs.get(run_id).started_at:%Y-%m-%d %H:%M:%S}"
    clock.advance(600)
    auth.as_role("operator", "olga")
    client.post(f"/runs/{run_id}/retry", data={"csrf_token": auth.csrf(f"/runs/{run_id}")})
    waiting = client.get(f"/runs/{run_id}").get_data(as_text=True)
    # Series 1's start and worker are not shown as if series 2 had them; they stay beside it, and on the timeline.
    assert fact(waiting, "Started") == f"not yet (series 2 is waiting) · series 1 started {first_start}"
    assert fact(waiting, "Worker") == "worker-a · from series 1; series 2 has none yet"
    assert '<td class="mono">worker-a</td>' in waiting
    # On the timeline, the worker is named where a worker acted: not on olga's retry, which copies the run's last.
    cells = {kind: re.findall(r'<td class="mono">([^<]*)</td>', row)[-1]
             for kind, row in re.findall(r'<tr class="ev-(\w+)">(.*?)</tr>', waiting, re.S)}
    assert cells["running"] == cells["dead"] == "worker-a" and cells["submitted"] == "—"
    assert [cells[kind] for kind in cells if kind not in ("running", "dead", "submitted")] == ["—"]
    clock.advance(60)
    assert execute(run_id, 0, clock=clock, worker_id="worker-b") == "dead"
    ran = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert "not yet" not in fact(ran, "Started") and fact(ran, "Worker") == "worker-b"
    # Once series 2 starts, Started and Duration are its own; series 1's start stays beside them.
    second_start = f"{clock():%Y-%m-%d %H:%M:%S}"
    assert fact(ran, "Started") == f"{second_start} · series 2; series 1 started {first_start}"
    assert fact(ran, "Duration") == "0 ms"  # from series 2's start, not series 1's eleven minutes before
    # The runs list says the same: series 2's start and duration, with series 1's start behind the "s2".
    row = list_row(client, run_id)
    assert row[STARTED] == f"{clock():%H:%M:%S} s2" and row[DURATION] == "0 ms"
    client.post(f"/runs/{run_id}/retry", data={"csrf_token": auth.csrf(f"/runs/{run_id}")})
    assert list_row(client, run_id)[STARTED] == "not yet" and list_row(client, run_id)[DURATION] == "—"
    client.post(f"/runs/{run_id}/cancel", data={"csrf_token": auth.csrf(f"/runs/{run_id}")})
    assert list_row(client, run_id)[STARTED] == "never"
    cancelled = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert runs.get(run_id).status == "cancelled" and fact(cancelled, "Duration") == "—"
    assert fact(cancelled, "Started") == f"series 3 never started · an earlier series started {first_start}"
    assert fact(cancelled, "Worker") == "worker-b · from an earlier series; series 3 has none"


def test_retry_now_under_an_open_breaker_says_the_run_will_wait_for_it_again(client, auth, runs, clock):
    run_id = runs.submit(clock=clock)
    run = runs.get(run_id)
    run.status, run.status_reason, run.next_retry_at = "retry_wait", "breaker_open", utcnow() + timedelta(seconds=60)
    db.session.commit()
    key = breakers.key_for(run.handler, run.tenant_id, "handler")
    breakers.record(key, False, utcnow(), BreakerSettings(failure_threshold=1, open_s=120, success_threshold=1))
    auth.as_role("operator")
    response = client.post(f"/runs/{run_id}/retry", data={"csrf_token": auth.csrf(f"/runs/{run_id}")})
    followed = client.get(response.headers["Location"]).get_data(as_text=True)
    assert f"Retried run #{run_id}: it is now pending." in followed
    assert "its handler&#39;s breaker is open until" in followed and "reset it on the Breakers page" in followed

    breakers.reset(key)
    run = runs.get(run_id)
    run.status, run.status_reason = "retry_wait", "breaker_open"
    db.session.commit()
    response = client.post(f"/runs/{run_id}/retry", data={"csrf_token": auth.csrf(f"/runs/{run_id}")})
    assert "breaker is open" not in client.get(response.headers["Location"]).get_data(as_text=True)


def test_a_retry_put_off_again_since_its_event_says_so_in_the_timeline(client, auth, runs, clock):
    """A breaker or a limit puts a waiting retry off without a new event: its "next 20:56:30" read as due for minutes
    after (helper 142); the timeline's newest event says it was put off since."""
    run_id = runs.submit("demo.flaky", {"fail_times": 1}, clock=clock)
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    auth.as_role("viewer")
    assert "put off to" not in client.get(f"/runs/{run_id}").get_data(as_text=True)
    run = runs.get(run_id)
    run.next_retry_at = run.next_retry_at + timedelta(minutes=7)  # as a breaker's put-off does
    db.session.commit()
    text = " ".join(re.sub(r"<[^>]+>", "", client.get(f"/runs/{run_id}").get_data(as_text=True)).split())
    assert re.search(r"next \d\d:\d\d:\d\d · put off to \d\d:\d\d:\d\d since", text), text[-3000:]


def test_a_retried_run_drops_the_result_of_the_series_before(client, auth, runs, clock):
    # Kept, a cancelled run's partial result read as the new series' while it ran (and a resent submit answered it).
    run_id = runs.submit(clock=clock)
    run = runs.get(run_id)
    run.status, run.result, run.finished_at = "cancelled", {"cancelled": True, "slept_s": 2.1}, utcnow()
    db.session.commit()
    headers = bearer(auth.make_user("svc", "operator"))
    retried = client.post("/internal/tasks/retry", json={"run_id": run_id}, headers=headers)
    assert retried.status_code == 202 and retried.json["series"] == 2
    assert retried.json["result"] is None
    assert client.get(f"/worker/tasks/{run_id}", headers=headers).json["result"] is None


def test_cancel_a_pending_run_over_htmx_returns_the_refreshed_run(client, auth, runs, clock):
    run_id = runs.submit(clock=clock)
    auth.as_role("operator", "otto")
    response = htmx_post(client, auth, f"/runs/{run_id}/cancel", run_id)
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert body.lstrip().startswith('<div id="run-detail"') and "<html" not in body
    assert "Cancelled run #" in body and "badge cancelled" in body and "hx-trigger" not in body[:body.index(">")]
    assert re.search(r'<tr class="ev-cancelled">', body) and "otto" in body.split('<table class="timeline">')[1]
    assert runs.status(run_id) == "cancelled"
    [entry] = audit_rows("run.cancel", run_id)
    assert entry.actor == "otto" and entry.before == {"status": "pending"}
    assert entry.after == {"status": "cancelled", "cancel_requested": False}
    # A cancelled run offers a retry and no second cancel.
    assert f'hx-post="/runs/{run_id}/retry"' in body and f'hx-post="/runs/{run_id}/cancel"' not in body
    # Its handler never ran: no "the handler returned nothing".
    assert "None: it was cancelled before its handler ran." in body and "The handler returned nothing" not in body


def test_an_illegal_cancel_is_a_409_with_the_reason_inline(client, auth, runs, clock):
    run_id = retried_to_success(runs, clock)
    auth.as_role("operator")
    token = auth.csrf(f"/runs/{run_id}")
    over_htmx = client.post(f"/runs/{run_id}/cancel", headers={"HX-Request": "true", "X-CSRFToken": token})
    assert over_htmx.status_code == 409
    body = over_htmx.get_data(as_text=True)
    assert body.lstrip().startswith('<div id="run-detail"')
    assert re.search(r'class="flash error"[^>]*>[^<]*only pending, retry_wait and running runs can be cancelled', body)
    plain = client.post(f"/runs/{run_id}/cancel", data={"csrf_token": token})
    assert plain.status_code == 409 and "only pending, retry_wait and running" in plain.get_data(as_text=True)
    assert runs.status(run_id) == "succeeded" and audit_rows("run.cancel", run_id) == []
    assert client.post(f"/runs/{run_id}/retry", data={"csrf_token": token}).status_code == 409


def test_viewers_see_no_actions_and_get_403_when_posting(client, auth, runs, clock):
    pending = runs.submit(clock=clock)
    dead = dead_run(runs, clock)
    auth.as_role("viewer")
    for run_id in (pending, dead):
        page = client.get(f"/runs/{run_id}").get_data(as_text=True)
        assert "Retry now" not in page and "/cancel" not in page and "/retry" not in page
    token = auth.csrf(f"/runs/{pending}")
    assert client.post(f"/runs/{pending}/cancel", data={"csrf_token": token}).status_code == 403
    assert client.post(f"/runs/{dead}/retry", data={"csrf_token": token}).status_code == 403
    assert (runs.status(pending), runs.status(dead)) == ("pending", "dead")
    assert audit_rows("run.cancel", pending) == [] and audit_rows("run.retry", dead) == []


def test_a_tenant_limited_person_sees_only_their_tenant(client, auth, runs, clock):
    globex = tenant("globex")
    tenant("acme")
    theirs = runs.submit(tenant="globex", clock=clock)
    other = runs.submit(tenant="acme", clock=clock)
    auth.make_user("gina", "operator", tenant=globex)
    auth.login("gina")
    page = client.get("/runs")
    assert listed(page) == [theirs]
    assert 'name="tenant"' not in page.get_data(as_text=True)  # nothing to choose from
    # Refused as the DLQ refuses it (403, what they see and what to remove), not dropped and not a filter typo.
    refused = client.get("/runs?tenant=acme")
    assert refused.status_code == 403 and listed(refused) == []
    assert "you see only tenant globex&#39;s runs; remove tenant=acme from the filter" in refused.get_data(as_text=True)
    dlq = client.get("/dlq/?tenant=acme")
    assert dlq.status_code == 403 and "you see only tenant globex&#39;s dead letters; remove tenant=acme" in \
        dlq.get_data(as_text=True)
    tasks = client.get("/tasks?tenant=acme")  # it showed their own tasks, the filter quietly dropped (helper 99)
    assert tasks.status_code == 403 and "you see only tenant globex&#39;s tasks; remove tenant=acme" in \
        tasks.get_data(as_text=True)
    assert client.get("/tasks?tenant=globex").status_code == 200
    gantt = client.get("/runs/timeline?tenant=nosuch")  # a name that does not exist is not told apart
    assert gantt.status_code == 403 and "remove tenant=nosuch from the filter" in gantt.get_data(as_text=True)
    assert listed(client.get("/runs?tenant=globex")) == [theirs]
    assert listed(client.get(f"/runs?q={runs.get(other).idempotency_key}")) == []
    assert client.get(f"/runs/{theirs}").status_code == 200
    assert client.get(f"/runs/{other}").status_code == 404
    token = auth.csrf(f"/runs/{theirs}")
    assert client.post(f"/runs/{other}/cancel", data={"csrf_token": token}).status_code == 404
    assert runs.status(other) == "pending"
    chart = client.get("/runs/timeline?created_from=2026-01-05T08:00&created_to=2026-01-05T10:00")
    labels = set(json.loads(html.unescape(re.search(r'data-figure="([^"]+)"', chart.get_data(as_text=True))
                                            .group(1)))["data"][0]["y"])
    assert labels == {f"#{theirs} globex/python:demo.noop"}


# ---- the Gantt ----

def test_timeline_page_draws_each_segment_kind(client, auth, runs, clock):
    recovered = retried_to_success(runs, clock)
    dead = dead_run(runs, clock)
    clock.advance(5)
    waiting = runs.submit(clock=clock)
    auth.as_role("viewer")
    response = client.get("/runs/timeline?created_from=2026-01-05T08:30&created_to=2026-01-05T09:30")
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert "/vendor/plotly.min.js" in body
    figure = json.loads(html.unescape(re.search(r'data-figure="([^"]+)"', body).group(1)))
    traces = {trace["name"]: trace for trace in figure["data"]}
    assert {"queue wait", "failed, will retry", "retry wait", "succeeded", "dead"} <= set(traces)
    assert all(trace["type"] == "bar" and trace["orientation"] == "h" for trace in traces.values())
    assert f"#{recovered} default/python:demo.flaky" in traces["retry wait"]["y"]
    assert traces["dead"]["y"] == [f"#{dead} default/python:demo.flaky"]
    assert traces["failed, will retry"]["customdata"][0][3] == "flaky"  # the hover names the error code
    assert f"#{waiting} default/python:demo.noop" in traces["queue wait"]["y"]
    assert figure["layout"]["xaxis"]["type"] == "date"
    assert figure["layout"]["yaxis"]["categoryarray"][0] == f"#{waiting} default/python:demo.noop"  # newest on top
    # The same segments as a table a keyboard and a screen reader reach (the bars answer a mouse only, by colour).
    assert 'class="gantt"' in body and re.search(r'class="gantt"[^>]*aria-hidden="true"', body)
    table = body[body.index('<table class="report-table timeline-table">'):]
    table = table[:table.index("</table>")]
    rows = [re.sub(r"<[^>]+>|\s+", " ", row).split() for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]]
    assert re.findall(rf'href="(/runs/{dead})"', table)[:1] == [f"/runs/{dead}"]
    assert rows[[r[0] for r in rows].index(f"#{recovered}") + 1][2:6] == ["failed,", "will", "retry", "1"]
    assert any(row[0] == f"#{dead}" and row[2] == "dead" and "invalid_account" in row for row in rows)
    assert len(rows) == sum(len(trace["y"]) for trace in traces.values())
    outside = client.get("/runs/timeline?created_from=2026-01-04T08:30&created_to=2026-01-04T09:30")
    assert "No runs were created between" in outside.get_data(as_text=True)
    # With no window given it shows the last hour of the real clock, where these frozen-clock runs are not.
    default = client.get("/runs/timeline").get_data(as_text=True)
    assert "No runs were created between" in default and "data-figure" not in default


def test_segments_follow_the_events_of_a_retried_run(app, runs, clock):
    run_id = runs.submit("demo.flaky", FLAKY_ONCE, clock=clock)
    clock.advance(2)
    execute(run_id, 0, clock=clock)
    waited = runs.get(run_id).next_retry_at
    clock.set(waited)
    execute(run_id, 1, clock=clock)
    run = runs.get(run_id)
    segments = run_timeline.segments_of(run, runs.events(run_id), clock())
    assert [(s.kind, s.attempt) for s in segments] == [
        ("queue wait", 0), ("failed, will retry", 1), ("retry wait", 1), ("succeeded", 2)]
    assert segments[0].end - segments[0].start == timedelta(seconds=2)
    assert segments[2].end == waited and segments[1].error_code == "flaky"


def test_the_timeline_defaults_to_the_last_hour_and_caps_the_runs(app, runs, clock):
    for _ in range(3):
        runs.submit(clock=clock)
    built = run_timeline.build(RunFilters(), (clock() - timedelta(hours=1), clock() + timedelta(seconds=1)),
                               scope=None, now=clock(), limit=2)
    assert len(built.runs) == 2 and built.truncated and built.kinds == {"queue wait"}


def test_a_deferred_run_shows_when_it_is_due(client, auth, runs, clock):
    first = runs.submit("demo.noop", policy={"concurrency": 1})
    second = runs.submit("demo.noop", policy={"concurrency": 1})
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": first})
    db.session.commit()
    assert execute(second, 0, clock=clock) == "deferred:concurrency"
    due = (clock() + timedelta(seconds=1)).strftime("%H:%M:%S")
    auth.as_role("viewer")
    page = client.get(f"/runs/{second}").get_data(as_text=True)
    assert "Deferred until" in page
    assert re.search(rf"· due <time[^>]*>{due}</time>", page)


# ---- totals, page size, ISO time inputs, a live Gantt ----

def counted(body: str) -> str:
    """Return the words of the list's count, without markup."""
    return re.sub(r"<[^>]+>", "", re.search(r'<span class="results-count"[^>]*>(.*?)</span>', body).group(1))


def test_the_list_says_how_many_runs_match_and_pages_by_the_size_chosen(client, auth, runs, clock, monkeypatch):
    ids = [runs.submit(clock=clock) for _ in range(30)]
    dead_run(runs, clock)
    auth.as_role("viewer", "vic")
    page = client.get("/runs?per_page=25").get_data(as_text=True)
    # It says which runs are shown, not the size of a page ("showing 25 per page" read as a count).
    assert 'data-total="31"' in page and counted(page) == "Runs 1–25 of 31"
    assert len(listed(client.get("/runs?per_page=25"))) == 25
    older = re.search(r'href="(/runs\?[^"]*before=\d+[^"]*)"', page).group(1)
    assert "per_page=25" in html.unescape(older)  # the next page keeps the size
    older_page = client.get(html.unescape(older))
    # An older page does not know how many newer runs it follows, so it gives no positions.
    assert len(listed(older_page)) == 6 and counted(older_page.get_data(as_text=True)) == "6 of the 31 runs"
    default = client.get("/runs").get_data(as_text=True)
    assert len(listed(client.get("/runs"))) == 31  # 50 by default, and the selector says so
    assert counted(default) == "31 runs, all shown"
    assert re.search(r'<option selected value="50">|<option value="50" selected>', default)
    filtered = client.get("/runs?status=dead").get_data(as_text=True)
    assert 'data-total="1"' in filtered and counted(filtered) == "1 run matches the filter"
    assert counted(client.get("/runs?status=cancelled").get_data(as_text=True)) == "No runs match the filter"
    found = client.get(f"/runs?q={runs.get(ids[0]).idempotency_key}").get_data(as_text=True)
    assert "data-total" not in found and counted(found) == "1 run found on this page"  # a text search is not counted
    monkeypatch.setattr(runs_query, "COUNT_CAP", 20)
    capped = client.get("/runs?status=pending&per_page=25").get_data(as_text=True)
    assert counted(capped) == "Runs 1–25 of more than 20 that match the filter"
    refused = client.get("/runs?per_page=7")
    assert refused.status_code == 422  # only the sizes offered, named ("Not a valid choice" named none)
    assert "show 25, 50, 100 or 200 runs per page" in refused.get_data(as_text=True)


def test_time_inputs_show_and_take_the_pages_iso_format(client, auth, runs, clock):
    auth.as_role("viewer", "vic")
    page = client.get("/runs?created_from=2026-12-01 14:05").get_data(as_text=True)
    assert 'type="text"' in page and 'value="2026-12-01 14:05"' in page and 'placeholder="YYYY-MM-DD HH:MM"' in page
    assert 'type="datetime-local"' not in page
    # The ISO "T" form (old links, the Overview's) still works, and shows as the page writes times.
    assert 'value="2026-12-01 14:05"' in client.get("/runs?created_from=2026-12-01T14:05").get_data(as_text=True)
    bad = client.get("/runs?created_from=12/01/2026")
    assert bad.status_code == 422 and "is a UTC time written YYYY-MM-DD HH:MM" in bad.get_data(as_text=True)


def test_the_gantt_refreshes_live_while_its_window_reaches_now(client, auth, runs):
    runs.submit()
    auth.as_role("viewer", "vic")
    live = client.get("/runs/timeline").get_data(as_text=True)
    assert 'hx-get="/runs/timeline"' in live and 'hx-trigger="every 10s"' in live and "live, every 10 s" in live
    past = client.get("/runs/timeline?created_from=2020-01-01 00:00&created_to=2020-01-01 01:00").get_data(as_text=True)
    assert 'hx-trigger="every 10s"' not in past


def test_progress_says_where_a_run_stopped_only_when_it_stopped_short(client, auth, runs):
    stopped, done, undone = (runs.submit() for _ in range(3))
    for run_id, status, progress in ((stopped, "dead", 40), (done, "dead", 100), (undone, "compensated", 100)):
        run = runs.get(run_id)
        run.status, run.progress = status, progress
        db.session.commit()
    auth.as_role("viewer")
    # "stopped at 100%" read as if something were cut short, on runs a person compensated on purpose too.
    assert [list_row(client, run_id)[STATUS] for run_id in (stopped, done, undone)] == [
        "dead stopped at 40%", "dead", "compensated"]


def test_a_jittered_cron_runs_page_says_it_is_due_by_its_jitter_not_a_window(client, auth, clock):
    cron_time = datetime(2026, 3, 6, 9, 10, tzinfo=UTC)
    clock.set(cron_time - timedelta(days=1))
    task = tasks.register(tenants.find("default"), {"name": "spread", "handler": "demo.noop", "cron": "*/2 * * * *",
                                                    "jitter_s": 45}, Actor("test"), clock)
    clock.set(cron_time + jitter_offset(task.id, 45))
    [outcome] = planner.fire([planner.Firing(task.id, cron_time)], Actor("scheduler"), clock)
    auth.as_role("viewer")
    page = client.get(f"/runs/{outcome.run_id}").get_data(as_text=True)
    assert "<dt>Due (jitter)</dt>" in page and "cron time 09:10" in page and "window" not in page


def test_a_running_run_whose_worker_went_silent_says_it_is_taken_for_lost(client, auth, runs, app, monkeypatch):
    monkeypatch.setitem(app.config, "STALE_AFTER_S", 30)  # the default (the tests run with 2)
    auth.as_role("viewer")
    run_id = runs.submit()
    beat = utcnow() - timedelta(seconds=12)
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1, worker_id = 'vm.7', "
                               "heartbeat_at = :beat WHERE id = :id"), {"beat": beat, "id": run_id})
    db.session.commit()
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert re.search(r"heartbeat <time[^>]*>1[2-9] s ago", page) and "taken for lost" not in page
    db.session.execute(db.text("UPDATE runs SET heartbeat_at = :beat WHERE id = :id"),
                       {"beat": utcnow() - timedelta(seconds=45), "id": run_id})
    db.session.commit()
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    # It read "heartbeat 33 s ago" for the minute the reconciler took, while Queues & workers said "lost".
    assert re.search(r"no heartbeat for 4\d s, over the 30 s a worker may stay silent: its worker is taken for lost",
                     page) and "retries this attempt as worker_lost" in page


def test_an_imported_attempt_says_its_system_kept_no_log_lines(client, auth, tmp_path):
    from console.services.dlq import import_sources, importer

    failure = {"id": "rq-7", "handler": "python:demo.noop", "error": {"type": "ValueError", "message": "bad row 7",
               "traceback": "Traceback (most recent call last):\n  ...\nValueError: bad row 7"}}
    (tmp_path / "old.jsonl").write_text(json.dumps(failure) + "\n")
    plan = importer.plan(import_sources.read_jsonl(str(tmp_path / "old.jsonl")), "jsonl", {}, None)
    importer.run_import(plan, Actor("test"))
    run_id = db.session.execute(select(DeadLetter.run_id)).scalar_one()
    auth.as_role("viewer")
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert "ValueError: bad row 7" in page and "the system it came from kept no log lines" in page
    assert "The handler logged nothing during this attempt" not in page  # no handler of Rebound's ran it
    assert fact(page, "Started") == "not recorded"  # a dead run that had "not yet" started (helper 119)


def test_a_page_past_the_oldest_run_says_so_not_that_there_are_none(client, auth, runs):
    # /runs?before=1 on a deployment with runs said "No runs yet … rebound seed-demo adds examples" (helper 112).
    runs.submit()
    auth.as_role("viewer")
    past = client.get("/runs?before=1").get_data(as_text=True)
    assert "No older runs." in past and "No runs yet." not in past
