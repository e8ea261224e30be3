"""The Tasks pages: list and filters, a task's schedule and runs, pause/resume, run now, edit, new, delete.

No worker runs here, so every run a task creates stays pending; Redis is real (queueing uses it).
"""

import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from markupsafe import escape
from sqlalchemy import event, select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import AuditEntry, DeadLetter, Run, RunEvent, Task, Tenant
from console.services.actor import Actor
from console.services.engine import control
from console.services.engine.execute import execute
from console.services.people import tenants
from console.services.policies import versions as policies
from console.services.scheduling import on_demand, quota_classes, task_query, tasks, template_insight, templates
from tests.factories import make_tenant
from tests.helpers import csrf_from

SEED = Actor("seed")



def make_task(tenant: Tenant | None = None, **fields) -> Task:
    body = {"name": "weekly-report", "handler": "demo.noop", "cron": "30 2 * * MON", "timezone": "Europe/Berlin",
            **fields}
    return tasks.register(tenant or tenants.ensure_default(), body, SEED)


def reload(task_id: int) -> Task:
    db.session.expire_all()
    return db.session.get(Task, task_id)


def audits(action: str, task_id: int) -> list[AuditEntry]:
    rows = db.session.execute(select(AuditEntry).where(AuditEntry.action == action,
                                                       AuditEntry.target_id == str(task_id))
                              .order_by(AuditEntry.seq)).scalars().all()
    db.session.rollback()
    return rows


def row_ids(html: str) -> set[int]:
    return {int(found) for found in re.findall(r'<tr id="task-(\d+)"', html)}


def form_body(task: Task, csrf: str, **changes) -> dict:
    """The edit form as a browser posts it for this task, with some fields changed."""
    body = {"csrf_token": csrf, "name": task.name, "handler": task.handler, "params": "", "cron": task.cron or "",
            "timezone": task.timezone, "event": task.event or "", "policy": "", "policy_overrides": "",
            "mutex_key": task.mutex_key or "", "concurrency_policy": task.concurrency_policy, "window": "",
            "jitter_s": str(task.jitter_s), "debounce_s": str(task.debounce_s),
            "misfire_grace_s": str(task.misfire_grace_s), "sla": "",
            "template": template_insight.template_name(task) or ""}
    # As the page fills it: a rule the task takes from its template is left empty.
    body.update({rule: "" for rule in task.inherits or ()})
    body.update(changes)
    return body


# -- the list ---------------------------------------------------------------------------------------------------------

def test_list_filters_by_tenant_handler_status_and_name(client, auth):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    report = make_task(acme, name="weekly-report")
    ledger = make_task(acme, name="nightly-ledger", handler="demo.flaky", cron="0 1 * * *", timezone="UTC")
    email = make_task(globex, name="order-email", cron=None, event="order.created", paused=True)
    auth.as_role("viewer")

    def shown(query: str) -> set[int]:
        response = client.get(f"/tasks{query}")
        assert response.status_code == 200
        return row_ids(response.get_data(as_text=True))

    assert shown("") == {report.id, ledger.id, email.id}
    assert shown("?tenant=acme") == {report.id, ledger.id}
    assert shown("?handler=python:demo.flaky") == {ledger.id}
    assert shown("?status=paused") == {email.id}
    assert shown("?status=active") == {report.id, ledger.id}
    assert shown("?q=LEDG") == {ledger.id}
    assert shown("?q=report&tenant=globex") == set()
    empty = client.get("/tasks?q=nothing-like-this").get_data(as_text=True)
    assert "No task matches." in empty and "Loosen the filters" in empty


def test_list_row_shows_trigger_in_words_next_firing_last_run_and_policy(client, auth):
    task = make_task(policy={"max_attempts": 5})
    paused = make_task(name="paused-one", cron="0 * * * *", timezone="UTC", paused=True)
    outcome = on_demand.run_now(task, SEED)
    auth.as_role("viewer")
    html = client.get("/tasks").get_data(as_text=True)
    row = html[html.index(f'<tr id="task-{task.id}"'):html.index("</tr>", html.index(f'<tr id="task-{task.id}"'))]
    assert "30 2 * * MON" in row and "At 02:30, only on Monday" in row
    assert re.search(r'<time datetime="[^"]+" title="[^"]+">in (\d+ d|\d+ h|\d+ min)', row), row
    assert f'href="/runs/{outcome.run_id}"' in row and 'class="badge pending"' in row
    assert "default" in row and "+ 1 override" in row
    paused_row = html[html.index(f'<tr id="task-{paused.id}"'):]
    assert 'class="badge paused"' in paused_row[:paused_row.index("</tr>")]


def test_list_htmx_filter_returns_only_the_results_region(client, auth):
    make_task()
    auth.as_role("viewer")
    response = client.get("/tasks?q=weekly", headers={"HX-Request": "true"})
    assert response.status_code == 200
    fragment = response.get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="results">') and "<html" not in fragment


def test_list_pages_by_id_newest_first(client, auth, app):
    made = [make_task(name=f"task-{n}") for n in range(5)]
    rows, next_id = task_query.page(now=made[0].created_at, limit=2)
    assert [row.task.id for row in rows] == [made[4].id, made[3].id] and next_id == made[3].id
    auth.as_role("viewer")
    html = client.get(f"/tasks?before={next_id}").get_data(as_text=True)
    assert row_ids(html) == {made[0].id, made[1].id, made[2].id}
    assert "← Newest" in html


def test_list_reads_the_last_runs_in_one_query_whatever_the_page_size(client, auth, app):
    auth.as_role("viewer")

    def statements_for_list() -> int:
        seen = []
        listener = lambda *args: seen.append(args[2])  # noqa: E731 - (conn, cursor, statement, ...)
        event.listen(db.engine, "before_cursor_execute", listener)
        try:
            assert client.get("/tasks").status_code == 200
        finally:
            event.remove(db.engine, "before_cursor_execute", listener)
        return len([s for s in seen if "tasks" in s or "runs" in s])

    for n in range(2):
        on_demand.run_now(make_task(name=f"small-{n}"), SEED)
    few = statements_for_list()
    for n in range(10):
        task = make_task(name=f"big-{n}")
        on_demand.run_now(task, SEED)
        on_demand.run_now(task, SEED)
    assert statements_for_list() == few
    newest = task_query.last_runs([task.id])[task.id]
    assert newest.id == max(r.id for r in db.session.execute(select(Run).where(Run.task_id == task.id)).scalars())


# -- the task page ----------------------------------------------------------------------------------------------------

def test_task_page_shows_cron_in_words_and_the_next_five_firings_in_its_zone(client, auth):
    task = make_task(params={"report": "weekly"}, mutex_key="reports", concurrency_policy="forbid",
                     sla={"deadline_s": 600}, window={"days": ["tue"], "start": "01:00", "end": "06:00",
                                                      "timezone": "Europe/Berlin"})
    auth.as_role("viewer")
    html = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert "At 02:30, only on Monday" in html and "Europe/Berlin" in html
    # Catch-up takes the latest missed firing once, not every one within the grace (the scheduler's rule).
    assert "the latest is caught up once if at most this old; the others count as missed" in html
    table = html[html.index('<table class="tasks-firings">'):html.index("</table>", html.index("tasks-firings"))]
    firings = re.findall(r'<td class="mono">Mon (\d{4}-\d\d-\d\d) 02:30 <span class="subtle">CES?T \((\+0[12]:00)\)',
                         table)
    assert len(firings) == 5, table
    assert len({day for day, _ in firings}) == 5
    assert "reports" in html and "forbid" in html and "succeed within 600 s" in html
    assert "tue 01:00–06:00" in html and "&#34;report&#34;: &#34;weekly&#34;" in html  # quotes escaped as text
    # Monday 02:30 is outside a Tuesday window: each firing says when it will really start.
    # Each with its own date: five Mondays wait for five different Tuesdays.
    starts = re.findall(r"starts Tue (\d{4}-\d\d-\d\d) 01:00 CES?T", table)  # in its zone, named (helper 139)
    assert len(starts) == 5 and len(set(starts)) == 5


def test_task_page_shows_the_sla_its_policy_gives_it_and_says_where_each_limit_comes_from(client, auth):
    policies.save("nightly", {"max_attempts": 2, "sla": {"max_start_delay_s": 300, "deadline_s": 3600}}, SEED)
    own_deadline = make_task(name="own-deadline", policy="nightly", sla={"deadline_s": 600})
    from_policy = make_task(name="from-policy", policy="nightly")
    without = make_task(name="without")
    auth.as_role("viewer")

    def sla_of(task: Task) -> str:
        html = client.get(f"/tasks/{task.id}").get_data(as_text=True)
        shown = html.split("<dt>SLA</dt>")[1].split("</dd>")[0]
        return " ".join(re.sub(r"<[^>]+>", "", re.sub(r"<span class=\"badge rule-source.*?</span>", "", shown)).split())

    # The SLA check holds a task to its policy's limits where it sets none itself: the page said "none".
    assert sla_of(own_deadline) == ("start within 300 s (5 min) (from retry policy nightly), "
                                    "succeed within 600 s (10 min)")
    assert sla_of(from_policy) == ("start within 300 s (5 min) (from retry policy nightly), "
                                   "succeed within 3600 s (1 h) (from retry policy nightly)")
    assert sla_of(without) == ("none (no breach is recorded; Reports' on-time figure counts a start over the 60 s "
                               "default late) from template default")


def test_task_page_lists_recent_runs_linked_to_the_runs_page(client, auth):
    task = make_task()
    outcomes = [on_demand.run_now(task, SEED) for _ in range(3)]
    auth.as_role("viewer")
    html = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    links = re.findall(r'href="/runs/(\d+)"', html)
    assert links == [str(o.run_id) for o in reversed(outcomes)]
    assert "manual" in html


def test_a_replayed_run_shows_its_series_start_not_series_1s(client, auth, clock):
    """The Runs list said 15:28:08 s2 where the task's page said 15:25:33 for the same run."""
    task = make_task(handler="demo.flaky", params={"fail_times": 9, "error": "fatal"})
    run_id = on_demand.run_now(task, SEED).run_id
    first = clock()
    assert execute(run_id, 0, clock=clock) == "dead"
    clock.advance(155)
    letter = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)).scalar_one()
    control.replay(letter, SEED, clock=clock)
    execute(run_id, 0, clock=clock)
    auth.as_role("viewer")
    html = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    row = re.search(rf'<tr>\s*<td><a class="mono" href="/runs/{run_id}".*?</tr>', html, re.S).group(0)
    assert f'datetime="{clock().isoformat()}"' in row and ">s2</span>" in row and "· s2</span>" in row
    assert f'title="{first.isoformat()}"' not in row.split("s2</span>")[1]  # not series 1's start as Started


def test_a_task_without_runs_says_no_runs_yet_not_last_0(client, auth):
    task = make_task()
    auth.as_role("viewer")
    heading = re.compile(r"<h2>Recent runs(.*?)</h2>", re.S)
    html = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert heading.search(html).group(1) == "" and "No runs yet." in html
    on_demand.run_now(task, SEED)
    html = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert heading.search(html).group(1) == (  # and where the rest are: the task page had no way to them
        f' <span class="subtle">· last 1 · <a href="/runs?task={task.id}">all runs of {task.name}</a></span>')
    assert '<th>Scheduled for (<span class="tz">UTC</span>)</th>' in html  # beside a zone's next firings


def test_event_only_task_page_says_how_it_fires(client, auth):
    task = make_task(name="order-email", cron=None, event="order.created")
    auth.as_role("viewer")
    html = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert "tasks-firings" not in html
    assert "Fires on event <code>order.created</code>" in html
    assert "for cron firings only: this task has no cron, so it never applies" in html  # its misfire grace
    assert "caught up once if at most this old" not in html


def test_missing_or_deleted_task_is_404(client, auth):
    task = make_task()
    tasks.delete(task, SEED)
    auth.as_role("viewer")
    assert client.get(f"/tasks/{task.id}").status_code == 404
    assert client.get("/tasks/999999").status_code == 404


# -- pause, resume, run now -------------------------------------------------------------------------------------------

def test_pause_and_resume_over_htmx_swap_the_header_and_are_audited(client, auth):
    task = make_task()
    auth.as_role("operator", "olga")
    csrf = auth.csrf(f"/tasks/{task.id}")
    response = client.post(f"/tasks/{task.id}/pause", data={"csrf_token": csrf}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    fragment = response.get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="task-head"')
    assert "<html" not in fragment and 'class="badge paused"' in fragment
    assert f'hx-post="/tasks/{task.id}/resume"' in fragment and f"Paused {task.name}." in fragment
    # The schedule comes along out of band: its next firings read "skipped" while the task is paused.
    schedule = fragment[fragment.index('<section id="task-schedule"'):]
    assert schedule.startswith('<section id="task-schedule" class="panel tasks-schedule" hx-swap-oob="true">')
    assert "the firings below are skipped" in schedule and schedule.count(">skipped</span>") == 5
    assert reload(task.id).paused is True
    page = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert page.count(">skipped</span>") == 5 and "the schedule creates none while the task is paused" in page
    assert "“Run now” still works" in page
    client.post("/logout", data={"csrf_token": csrf})
    auth.as_role("viewer", "vic")  # who has no Run now: it was said to them too (helper 142)
    assert "“Run now” still works" not in client.get(f"/tasks/{task.id}").get_data(as_text=True)
    client.post("/logout", data={"csrf_token": auth.csrf(f"/tasks/{task.id}")})
    auth.login("olga")
    csrf = auth.csrf(f"/tasks/{task.id}")
    [entry] = audits("task.pause", task.id)
    assert (entry.actor, entry.before, entry.after) == ("olga", {"paused": False}, {"paused": True})

    response = client.post(f"/tasks/{task.id}/resume", data={"csrf_token": csrf}, headers={"HX-Request": "true"})
    fragment = response.get_data(as_text=True)
    assert response.status_code == 200 and f'hx-post="/tasks/{task.id}/pause"' in fragment
    assert f"Resumed {task.name}." in fragment and ">skipped</span>" not in fragment
    assert reload(task.id).paused is False
    assert len(audits("task.resume", task.id)) == 1


def test_pause_over_htmx_also_refreshes_the_runs_panel_and_clears_old_flashes(client, auth):
    task = make_task()
    auth.as_role("operator", "olga")
    page = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert "the schedule creates the next one" in page and '<div id="flashes">' in page
    response = client.post(f"/tasks/{task.id}/pause", data={"csrf_token": csrf_from(page)},
                           headers={"HX-Request": "true"})
    fragment = response.get_data(as_text=True)
    # The runs panel's hint spoke of the next firing; a "Saved" flash from the edit before would still be shown.
    runs = fragment[fragment.index('<section id="task-runs"'):]
    assert runs.startswith('<section id="task-runs" hx-swap-oob="true">')
    assert "the schedule creates none while the task is paused" in runs
    assert "the schedule creates the next one" not in fragment
    assert '<div id="flashes" hx-swap-oob="true"></div>' in fragment


def test_pause_without_htmx_redirects_with_a_flash(client, auth):
    task = make_task()
    auth.as_role("operator")
    response = client.post(f"/tasks/{task.id}/pause", data={"csrf_token": auth.csrf()})
    assert response.status_code == 303 and response.headers["Location"] == f"/tasks/{task.id}"
    assert f"Paused {task.name}." in client.get(f"/tasks/{task.id}").get_data(as_text=True)


def test_run_now_creates_a_manual_run_and_links_to_it(client, auth):
    task = make_task(paused=True)
    auth.as_role("operator", "olga")
    response = client.post(f"/tasks/{task.id}/trigger", data={"csrf_token": auth.csrf()})
    assert response.status_code == 303 and response.headers["Location"] == f"/tasks/{task.id}"
    [run] = db.session.execute(select(Run).where(Run.task_id == task.id)).scalars().all()
    assert (run.source, run.status, run.handler) == ("manual", "pending", "python:demo.noop")
    page = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert f'Queued <a href="/runs/{run.id}">run #{run.id}</a> of {task.name}.' in page
    [entry] = audits("task.trigger", task.id)
    assert entry.actor == "olga" and entry.after == {"run_id": run.id}


def closed_window() -> dict:
    """An execution window that is closed now: an hour starting two hours from now, every day, in UTC."""
    opens = (utcnow().hour + 2) % 24
    return {"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], "start": f"{opens:02d}:00",
            "end": f"{(opens + 1) % 24:02d}:00", "timezone": "UTC"}


def test_list_says_when_a_window_defers_the_next_firing(client, auth):
    deferred = make_task(name="hourly-in-window", cron="0 * * * *", timezone="UTC", window=closed_window())
    free = make_task(name="hourly-any-time", cron="0 * * * *", timezone="UTC")
    auth.as_role("viewer")
    html = client.get("/tasks").get_data(as_text=True)
    opens = utcnow().replace(minute=0, second=0, microsecond=0) + timedelta(hours=2)

    def row(task):
        start = html.index(f'<tr id="task-{task.id}"')
        return html[start:html.index("</tr>", start)]

    assert f'the run waits for it">starts {opens:%a %Y-%m-%d %H:%M} UTC</span>' in row(deferred)
    assert "starts " not in row(free) and "in " in row(free)


def test_a_window_whose_end_is_its_start_or_before_it_says_how_long_it_stays_open(client, auth):
    # "mon 08:00–08:00 UTC" read as an empty window; it is open 24 h from each opening (helper 106).
    whole = make_task(name="whole-day", window={"days": ["mon"], "start": "08:00", "end": "08:00"})
    night = make_task(name="night", window={"days": ["fri"], "start": "22:00", "end": "06:00"})
    auth.as_role("viewer")
    assert "08:00–08:00 <span class=\"subtle\">UTC</span> <span class=\"subtle\">(24 h from each opening)</span>" in \
        client.get(f"/tasks/{whole.id}").get_data(as_text=True)
    assert "(closes the next day)" in client.get(f"/tasks/{night.id}").get_data(as_text=True)


def test_outside_its_window_run_now_offers_to_wait_or_to_start_now_audited(client, auth):
    task = make_task(window=closed_window(), timezone="UTC")
    auth.as_role("operator", "olga")
    page = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert ">Run when the window opens</button>" in page and 'name="outside_window" value="1"' in page
    client.post(f"/tasks/{task.id}/trigger", data={"csrf_token": auth.csrf()})
    [waiting] = db.session.execute(select(Run).where(Run.task_id == task.id)).scalars().all()
    assert waiting.status_reason == "window"
    # Asked to run now while its run waits for the window: that run starts, no second one is made.
    client.post(f"/tasks/{task.id}/trigger", data={"csrf_token": auth.csrf(), "outside_window": "1"})
    assert (f'Started <a href="/runs/{waiting.id}">run #{waiting.id}</a> of {task.name} now, outside its execution '
            "window: it was waiting for the window to open.") in client.get(f"/tasks/{task.id}").get_data(as_text=True)
    client.post(f"/tasks/{task.id}/trigger", data={"csrf_token": auth.csrf(), "outside_window": "1"})
    db.session.expire_all()
    released, now = db.session.execute(select(Run).where(Run.task_id == task.id).order_by(Run.id)).scalars().all()
    assert (released.id, released.status, released.status_reason, now.status_reason) == (
        waiting.id, "pending", None, None)
    last = db.session.execute(select(RunEvent).where(RunEvent.run_id == released.id).order_by(RunEvent.id.desc())
                              ).scalars().first()
    assert (last.kind, last.reason, last.actor) == ("released", "outside_window", "olga")
    assert [entry.after for entry in audits("task.trigger", task.id)] == [
        {"run_id": waiting.id}, {"run_id": waiting.id, "outside_window": True, "released": True},
        {"run_id": now.id, "outside_window": True}]
    assert f'Queued <a href="/runs/{now.id}">run #{now.id}</a> of {task.name} outside its execution window.' in (
        client.get(f"/tasks/{task.id}").get_data(as_text=True))
    open_now = make_task(name="any-time")
    assert ">Run now</button>" in client.get(f"/tasks/{open_now.id}").get_data(as_text=True)


def test_run_when_the_window_opens_of_a_forbid_task_whose_run_waits_says_so_and_makes_none(client, auth):
    """It made a second run, cancelled at once: "did not start: another run with the same mutex key is active"."""
    task = make_task(window=closed_window(), timezone="UTC", mutex_key="ledger", concurrency_policy="forbid")
    auth.as_role("operator", "olga")
    client.post(f"/tasks/{task.id}/trigger", data={"csrf_token": auth.csrf()})
    client.post(f"/tasks/{task.id}/trigger", data={"csrf_token": auth.csrf()})
    [waiting] = db.session.execute(select(Run).where(Run.task_id == task.id)).scalars().all()
    assert (f'No second run was made: <a href="/runs/{waiting.id}">run #{waiting.id}</a> of {task.name} already waits '
            "for the execution window") in client.get(f"/tasks/{task.id}").get_data(as_text=True)


# -- posting an event from the task page ------------------------------------------------------------------------------

def event_runs(task: Task) -> list[Run]:
    rows = db.session.execute(select(Run).where(Run.task_id == task.id)).scalars().all()
    db.session.rollback()
    return rows


def test_event_task_page_offers_operators_to_post_its_event_naming_the_other_listeners(client, auth):
    task = make_task(name="order-email", cron=None, event="order.created")
    sms = make_task(name="order-sms", cron=None, event="order.created", paused=True)
    make_task(name="other-event", cron=None, event="order.paid")
    auth.as_role("operator")
    html = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert f'action="/tasks/{task.id}/event"' in html and "Post order.created" in html
    assert f'1 other task too:\n        <a href="/tasks/{sms.id}">order-sms</a> (paused, skipped)' in html
    client.post("/logout", data={"csrf_token": csrf_from(html)})
    auth.as_role("viewer", "vera")
    assert f"/tasks/{task.id}/event" not in client.get(f"/tasks/{task.id}").get_data(as_text=True)
    cron_only = make_task(name="nightly")
    assert client.post(f"/tasks/{task.id}/event", data={"csrf_token": auth.csrf()}).status_code == 403
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("operator", "otto")
    assert client.post(f"/tasks/{cron_only.id}/event", data={"csrf_token": auth.csrf()}).status_code == 404


def test_posting_the_event_fires_every_enabled_listener_with_the_data_and_is_audited(client, auth):
    task = make_task(name="order-email", cron=None, event="order.created", params={"template": "receipt"})
    sms = make_task(name="order-sms", cron=None, event="order.created")
    paused = make_task(name="order-fax", cron=None, event="order.created", paused=True)
    auth.as_role("operator", "olga")
    response = client.post(f"/tasks/{task.id}/event",
                           data={"csrf_token": auth.csrf(f"/tasks/{task.id}"), "data": '{"order": 42}'})
    assert response.status_code == 303 and response.headers["Location"] == f"/tasks/{task.id}"
    [run] = event_runs(task)
    [sms_run] = event_runs(sms)
    assert (run.source, run.params) == ("event", {"template": "receipt", "order": 42})
    assert event_runs(paused) == []
    page = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert (f'Posted order.created to default: queued <a href="/runs/{run.id}">run #{run.id}</a> of order-email; '
            f'queued <a href="/runs/{sms_run.id}">run #{sms_run.id}</a> of order-sms; '
            'order-fax did not fire (paused).') in page
    [entry] = audits("event.post", task.id)
    assert entry.actor == "olga" and entry.after["type"] == "order.created" and entry.after["data"] == {"order": 42}
    assert [(r["task_id"], r["run_id"], r["status"]) for r in entry.after["runs"]] == [
        (task.id, run.id, "created"), (sms.id, sms_run.id, "created"), (paused.id, None, "paused")]


def test_posting_the_event_of_a_paused_task_says_nothing_fired(client, auth):
    task = make_task(name="order-email", cron=None, event="order.created", paused=True)
    auth.as_role("operator")
    assert "This task is paused, so the event skips it." in client.get(f"/tasks/{task.id}").get_data(as_text=True)
    client.post(f"/tasks/{task.id}/event", data={"csrf_token": auth.csrf(), "data": ""})
    page = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert "Posted order.created to default: order-email did not fire (paused)." in page
    assert event_runs(task) == []


@pytest.mark.parametrize("typed, message", [
    ("{order: 42", "Data is not valid JSON: Expecting property name enclosed in double quotes at line 1, column 2"),
    ("[1, 2]", "data must be a JSON object"),
    ('{"a": 1, "a": 2}', "Data: the key &#39;a&#39; is given twice in one object: give it once"),
    ('{"x": "\\ud800"}', "not valid Unicode"),
    ("[" * 5000 + "]" * 5000, "nested deeper than 64 levels"),
    ('{"blob": "' + "x" * 70_000 + '"}', "data: params are 70,012 bytes as stored; at most 65,536"),
    ('{"blob": "' + "日" * 12_000 + '"}', "data: params are 72,012 bytes as stored (JSON, where each character outside "
                                         "ASCII is written as a 6-byte \\u escape); at most 65,536"),
    ('{"n": ' + "9" * 5000 + "}", "Data: a number in the JSON has more than 4,300 digits"),
])
def test_bad_event_data_is_422_at_the_field_keeping_what_was_typed_and_fires_nothing(client, auth, typed, message):
    task = make_task(name="order-email", cron=None, event="order.created")
    auth.as_role("operator")
    response = client.post(f"/tasks/{task.id}/event", data={"csrf_token": auth.csrf(), "data": typed})
    html = response.get_data(as_text=True)
    assert response.status_code == 422 and message in html and "Nothing was posted." in html
    assert 'aria-invalid="true"' in html and "<details class=\"tasks-event\" open>" in html
    assert f">{escape(typed)}</textarea>" in html
    assert event_runs(task) == [] and audits("event.post", task.id) == []


# -- edit -------------------------------------------------------------------------------------------------------------

def test_edit_form_is_filled_with_the_current_definition(client, auth):
    task = make_task(params={"report": "weekly"}, policy={"max_attempts": 5}, window={"start": "08:00", "end": "18:00"})
    auth.as_role("operator")
    html = client.get(f"/tasks/{task.id}/edit").get_data(as_text=True)
    assert 'value="30 2 * * MON"' in html and 'value="Europe/Berlin"' in html
    assert "{&#34;report&#34;: &#34;weekly&#34;}" in html and "{&#34;max_attempts&#34;: 5}" in html
    assert "&#34;start&#34;: &#34;08:00&#34;" in html
    assert "At 02:30, only on Monday" in html  # the preview, rendered with the page


def test_edit_with_an_invalid_cron_is_422_with_the_error_on_the_cron_field_and_changes_nothing(client, auth):
    task = make_task()
    before = tasks.snapshot(task)
    auth.as_role("operator")
    response = client.post(f"/tasks/{task.id}/edit", data=form_body(
        task, auth.csrf(f"/tasks/{task.id}/edit"), cron="61 * * * *", params='{"report": "monthly"}'))
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    assert re.search(r'id="cron-error">field 1 \(minute\) value 61 is out of range 0-59<', html), html
    assert 'value="61 * * * *"' in html and "monthly" in html  # what was typed stays
    assert tasks.snapshot(reload(task.id)) == before
    assert audits("task.edit", task.id) == []


@pytest.mark.parametrize(("changes", "field", "message"), [
    ({"params": "{report: 1}"}, "params", "params is not valid JSON"),
    ({"params": "[1, 2]"}, "params", "params must be a JSON object"),
    ({"params": '{"a": 1, "a": 2}'}, "params", "params: the key &#39;a&#39; is given twice"),
    ({"timezone": "Europe/Berln"}, "timezone", "did you mean &#39;Europe/Berlin&#39;"),
    ({"window": '{"start": "8am", "end": "18:00"}'}, "window", "start must be a 24-hour time"),
    ({"policy_overrides": '{"max_attempts": 0}'}, "policy_overrides", "max_attempts"),
    ({"policy": "no-such-policy"}, "policy", "no retry policy named"),
    ({"sla": '{"deadline_s": -5}'}, "sla", "deadline_s"),
    ({"jitter_s": "soon"}, "jitter_s", "jitter_s must be a whole number of seconds from 0 to 3600"),
    # More digits than int() reads: a 500 before, for each of the three number boxes.
    ({"jitter_s": "9" * 5000}, "jitter_s", "jitter_s must be a whole number of seconds from 0 to 3600"),
    ({"debounce_s": "9" * 5000}, "debounce_s", "debounce_s must be a whole number of seconds"),
    ({"misfire_grace_s": "9" * 5000}, "misfire_grace_s", "misfire_grace_s must be a whole number of seconds"),
    ({"cron": "", "event": "order.created", "jitter_s": "30"}, "jitter_s",
     "a jitter spreads cron firings only, and this task has no cron: give it a cron expression, or set the jitter to "
     "0"),
    ({"handler": "demo.nope"}, "handler", "no Python handler named"),
])
def test_edit_puts_each_service_refusal_under_its_field(client, auth, changes, field, message):
    task = make_task()
    auth.as_role("operator")
    response = client.post(f"/tasks/{task.id}/edit", data=form_body(task, auth.csrf(), **changes))
    assert response.status_code == 422
    errors = re.findall(rf'id="{field}-error">([^<]*)<', response.get_data(as_text=True))
    assert errors and message in errors[0], response.get_data(as_text=True)
    assert audits("task.edit", task.id) == []


def marked(html: str) -> dict[str, str]:
    """Return each field's first error, by the field's name."""
    return dict(reversed(re.findall(r'id="(\w+)-error">([^<]*)<', html)))


def test_edit_marks_every_field_the_service_refuses_at_once(client, auth):
    make_task(name="taken")
    task = make_task(name="mine")
    before = tasks.snapshot(task)
    auth.as_role("operator")
    response = client.post(f"/tasks/{task.id}/edit", data=form_body(
        task, auth.csrf(), name="taken", cron="61 * * * *", sla='{"deadline_s": -5}', jitter_s="soon",
        policy_overrides='{"max_attempts": 0}', params="{report: 1}"))
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    errors = marked(page)
    assert set(errors) == {"name", "cron", "sla", "jitter_s", "policy_overrides", "params"}, errors
    assert errors["name"].startswith("tenant default already has a task named")
    assert "Nothing was saved: fix the 6 fields marked below." in page
    assert tasks.snapshot(reload(task.id)) == before and audits("task.edit", task.id) == []


def test_renaming_to_a_taken_name_is_409_on_the_name_field(client, auth):
    make_task(name="taken")
    task = make_task(name="mine")
    auth.as_role("operator")
    response = client.post(f"/tasks/{task.id}/edit", data=form_body(task, auth.csrf(), name="taken"))
    assert response.status_code == 409
    assert re.search(r'id="name-error">tenant default already has a task named', response.get_data(as_text=True))
    assert reload(task.id).name == "mine"


def test_edit_with_valid_data_saves_and_audits_before_and_after(client, auth):
    task = make_task()
    auth.as_role("operator", "olga")
    response = client.post(f"/tasks/{task.id}/edit", data=form_body(
        task, auth.csrf(), cron="0 9 * * MON-FRI", timezone="Asia/Tokyo", params='{"report": "daily"}',
        policy_overrides='{"max_attempts": 7}', window='{"days": ["mon", "fri"], "start": "08:00", "end": "18:00"}',
        sla='{"max_start_delay_s": 60}', mutex_key="reports", concurrency_policy="replace", jitter_s="15"))
    assert response.status_code == 303 and response.headers["Location"] == f"/tasks/{task.id}"
    saved = reload(task.id)
    assert (saved.cron, saved.timezone, saved.params) == ("0 9 * * MON-FRI", "Asia/Tokyo", {"report": "daily"})
    assert (saved.policy_id, saved.policy_overrides) == (None, {"max_attempts": 7})
    assert saved.window == {"days": ["mon", "fri"], "start": "08:00", "end": "18:00", "timezone": "UTC"}
    assert (saved.sla, saved.mutex_key, saved.concurrency_policy, saved.jitter_s) == (
        {"max_start_delay_s": 60}, "reports", "replace", 15)
    [entry] = audits("task.edit", task.id)
    assert entry.actor == "olga"
    assert (entry.before["cron"], entry.after["cron"]) == ("30 2 * * MON", "0 9 * * MON-FRI")
    assert (entry.before["policy"], entry.after["policy"]) == (None, {"max_attempts": 7})
    assert "At 09:00, Monday through Friday" in client.get(f"/tasks/{task.id}").get_data(as_text=True)


def test_saving_an_unchanged_form_writes_no_audit_entry(client, auth):
    task = make_task()
    auth.as_role("operator")
    assert client.post(f"/tasks/{task.id}/edit", data=form_body(task, auth.csrf())).status_code == 303
    assert audits("task.edit", task.id) == []


# -- new and delete ---------------------------------------------------------------------------------------------------

def test_new_task_registers_it_and_audits(client, auth):
    acme = make_tenant("acme")
    auth.as_role("operator", "olga")
    form = client.get("/tasks/new").get_data(as_text=True)
    assert '<option selected value="default">default</option>' in form or 'value="default" selected' in form
    response = client.post("/tasks/new", data={
        "csrf_token": auth.csrf("/tasks/new"), "tenant": "acme", "name": "order-email", "handler": "demo.noop",
        "params": '{"template": "receipt"}', "cron": "", "timezone": "UTC", "event": "order.created",
        "policy": "", "policy_overrides": "", "mutex_key": "", "concurrency_policy": "allow", "window": "",
        "jitter_s": "0", "debounce_s": "30", "misfire_grace_s": "300", "sla": "", "paused": "y"})
    task = db.session.execute(select(Task).where(Task.name == "order-email")).scalar_one()
    assert response.status_code == 303 and response.headers["Location"] == f"/tasks/{task.id}"
    assert (task.tenant_id, task.event, task.cron, task.debounce_s, task.paused, task.params) == (
        acme.id, "order.created", None, 30, True, {"template": "receipt"})
    [entry] = audits("task.register", task.id)
    assert entry.actor == "olga" and entry.after["event"] == "order.created" and entry.tenant == "acme"


def test_new_task_with_bad_input_is_422_and_keeps_what_was_typed(client, auth):
    auth.as_role("operator")
    response = client.post("/tasks/new", data={
        "csrf_token": auth.csrf("/tasks/new"), "tenant": "default", "name": "nightly", "handler": "demo.noop",
        "cron": "0 25 * * *", "timezone": "UTC", "concurrency_policy": "allow", "jitter_s": "0", "debounce_s": "0",
        "misfire_grace_s": "300"})
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    assert re.search(r'id="cron-error">field 2 \(hour\) value 25 is out of range 0-23<', html)
    assert 'value="nightly"' in html
    assert db.session.execute(select(Task)).first() is None
    # Bad JSON in a box is marked at the box, the rest kept, as on the edit form (it was a bare error page).
    for params, message in (('{"a": "\\ud800"}', "is not valid Unicode"), ("[" * 5000 + "]" * 5000, "deeper than 64")):
        response = client.post("/tasks/new", data={
            "csrf_token": auth.csrf("/tasks/new"), "tenant": "default", "name": "nightly", "handler": "demo.noop",
            "cron": "0 2 * * *", "timezone": "UTC", "concurrency_policy": "allow", "jitter_s": "0",
            "debounce_s": "0", "misfire_grace_s": "300", "params": params})
        html = response.get_data(as_text=True)
        assert response.status_code == 422 and 'value="nightly"' in html
        assert message in re.findall(r'id="params-error">([^<]*)<', html)[0]
    assert db.session.execute(select(Task)).first() is None


def test_new_task_marks_every_field_the_service_refuses_at_once_and_saves_nothing(client, auth):
    auth.as_role("operator")
    response = client.post("/tasks/new", data={
        "csrf_token": auth.csrf("/tasks/new"), "tenant": "default", "name": "nightly!", "handler": "demo.nope",
        "params": '{"a": 1', "cron": "0 25 * * *", "timezone": "Mars/Olympus", "event": "Task.Started",
        "policy": "no-such-policy", "concurrency_policy": "sometimes", "window": '{"start": "8am", "end": "18:00"}',
        "jitter_s": "soon", "debounce_s": "-1", "misfire_grace_s": "300", "sla": '{"deadline_s": -5}'})
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    errors = marked(page)
    assert set(errors) == {"name", "handler", "params", "cron", "timezone", "event", "policy", "concurrency_policy",
                           "window", "jitter_s", "debounce_s", "sla"}, errors
    assert errors["cron"] == "field 2 (hour) value 25 is out of range 0-23"  # the zone's said too, not after it
    assert errors["params"].startswith("params is not valid JSON")
    assert "Nothing was saved: fix the 12 fields marked below." in page
    assert 'value="nightly!"' in page and 'value="0 25 * * *"' in page  # what was typed stays
    assert db.session.execute(select(Task)).first() is None


def test_delete_hides_the_task_and_frees_its_name(client, auth):
    task = make_task()
    auth.as_role("operator", "olga")
    page = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert 'data-confirm="Delete task weekly-report? It never fires again' in page
    response = client.post(f"/tasks/{task.id}/delete", data={"csrf_token": auth.csrf()})
    assert response.status_code == 303 and response.headers["Location"] == "/tasks"
    assert reload(task.id).deleted_at is not None
    listing = client.get("/tasks").get_data(as_text=True)
    assert task.id not in row_ids(listing) and "Deleted weekly-report." in listing
    assert client.get(f"/tasks/{task.id}").status_code == 404
    [entry] = audits("task.delete", task.id)
    assert entry.actor == "olga"
    make_task()  # the name is free again


def test_deleting_a_task_with_runs_still_waiting_says_they_will_run_and_links_them(client, auth):
    task = make_task(window=closed_window(), timezone="UTC")
    auth.as_role("operator", "olga")
    client.post(f"/tasks/{task.id}/trigger", data={"csrf_token": auth.csrf()})  # waits for the window
    [waiting] = db.session.execute(select(Run).where(Run.task_id == task.id)).scalars().all()
    client.post(f"/tasks/{task.id}/delete", data={"csrf_token": auth.csrf()})
    listing = client.get("/tasks").get_data(as_text=True)
    link = f"/runs?task={task.id}&amp;status=pending&amp;status=retry_wait"
    assert (f'Deleted weekly-report; it never fires again. 1 of its runs still wait to start or retry and will run '
            f'unless cancelled: <a href="{link}">see them</a>.') in listing
    assert f'href="/runs/{waiting.id}"' in client.get(link.replace("&amp;", "&")).get_data(as_text=True)
    [entry] = audits("task.delete", task.id)
    assert entry.after == {"waiting_runs": 1}


def test_a_deleted_tasks_runs_name_it_as_it_was_marked_deleted(client, auth):
    task = make_task(window=closed_window(), timezone="UTC")
    auth.as_role("operator", "olga")
    client.post(f"/tasks/{task.id}/trigger", data={"csrf_token": auth.csrf()})
    [run] = db.session.execute(select(Run).where(Run.task_id == task.id)).scalars().all()
    client.post(f"/tasks/{task.id}/delete", data={"csrf_token": auth.csrf()})
    for page in (client.get("/runs").get_data(as_text=True), client.get(f"/runs/{run.id}").get_data(as_text=True)):
        assert "<strong>weekly-report (deleted)</strong>" in page and "~deleted" not in page
    assert f'href="/tasks/{task.id}"' not in client.get(f"/runs/{run.id}").get_data(as_text=True)  # a 404 now
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("manager")
    reports = client.get("/reports").get_data(as_text=True)  # its task filter offers it by the name people knew
    assert ">default / weekly-report (deleted)</option>" in reports and "~deleted" not in reports


# -- cron preview -----------------------------------------------------------------------------------------------------

def test_cron_preview_describes_a_valid_expression_with_five_firings(client, auth):
    auth.as_role("operator")
    response = client.get("/tasks/cron-preview", query_string={"cron": "0 9 * * MON-FRI", "timezone": "Asia/Tokyo"})
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith('<div id="cron-preview"')
    assert "At 09:00, Monday through Friday" in html and "Asia/Tokyo" in html
    firings = re.findall(r'<li class="mono">(Mon|Tue|Wed|Thu|Fri) \d{4}-\d\d-\d\d 09:00 '
                         r'<span class="subtle">JST \+09:00', html)
    assert len(firings) == 5


@pytest.mark.parametrize(("query", "label", "message"), [
    ({"cron": "0 25 * * *"}, "Cron", "field 2 (hour) value 25 is out of range 0-23"),
    ({"cron": "0 9 * *"}, "Cron", "expected 5 fields"),
    ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "Time zone", "unknown IANA time zone"),
])
def test_cron_preview_says_what_is_wrong(client, auth, query, label, message):
    auth.as_role("operator")
    html = client.get("/tasks/cron-preview", query_string=query).get_data(as_text=True)
    assert f"<strong>{label}:</strong>" in html and message in html.replace("&#39;", "'")
    assert "<li" not in html


def test_cron_preview_of_no_expression_says_the_task_is_event_only(client, auth):
    auth.as_role("operator")
    html = client.get("/tasks/cron-preview?cron=&timezone=UTC").get_data(as_text=True)
    assert "fires only on its event" in html


# -- who may do what --------------------------------------------------------------------------------------------------

def test_viewer_sees_no_actions_and_every_post_is_403(client, auth):
    task = make_task()
    auth.as_role("viewer")
    assert "New task" not in client.get("/tasks").get_data(as_text=True)
    page = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    for action in ("/pause", "/resume", "/trigger", "/delete", "/edit"):
        assert f"/tasks/{task.id}{action}" not in page
    csrf = auth.csrf(f"/tasks/{task.id}")
    for path in (f"/tasks/{task.id}/pause", f"/tasks/{task.id}/resume", f"/tasks/{task.id}/trigger",
                 f"/tasks/{task.id}/delete", f"/tasks/{task.id}/edit", "/tasks/new"):
        assert client.post(path, data=form_body(task, csrf)).status_code == 403, path
    assert client.get(f"/tasks/{task.id}/edit").status_code == 403
    assert client.get("/tasks/new").status_code == 403
    assert tasks.snapshot(reload(task.id)) == tasks.snapshot(task)
    assert db.session.execute(select(Run)).first() is None


def test_tenant_limited_user_sees_and_acts_on_their_tenant_only(client, auth):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    mine = make_task(acme, name="acme-report")
    theirs = make_task(globex, name="globex-report")
    auth.make_user("ann", "operator", tenant=acme)
    assert auth.login("ann").status_code == 302
    listing = client.get("/tasks").get_data(as_text=True)
    assert row_ids(listing) == {mine.id} and "globex" not in listing
    other = client.get("/tasks?tenant=globex")  # refused, as Runs and the DLQ refuse it; it listed their own
    assert other.status_code == 403 and row_ids(other.get_data(as_text=True)) == set()
    assert client.get(f"/tasks/{theirs.id}").status_code == 404
    assert client.get(f"/tasks/{theirs.id}/edit").status_code == 404
    csrf = auth.csrf()
    for path in (f"/tasks/{theirs.id}/pause", f"/tasks/{theirs.id}/trigger", f"/tasks/{theirs.id}/delete"):
        assert client.post(path, data={"csrf_token": csrf}).status_code == 404, path
    assert reload(theirs.id).paused is False and reload(theirs.id).deleted_at is None
    form = client.get("/tasks/new").get_data(as_text=True)
    assert "acme" in form and "globex" not in form
    response = client.post("/tasks/new", data={
        "csrf_token": csrf, "tenant": "globex", "name": "sneaky", "handler": "demo.noop", "cron": "@daily",
        "timezone": "UTC", "concurrency_policy": "allow", "jitter_s": "0", "debounce_s": "0", "misfire_grace_s": "300"})
    assert response.status_code == 403
    assert "you may register tasks only for tenant acme" in response.get_data(as_text=True)
    assert db.session.execute(select(Task).where(Task.name == "sneaky")).first() is None


class _FormReader(HTMLParser):
    """The values a browser would post for a page's task form: inputs, text areas and selected options."""

    def __init__(self):
        super().__init__()
        self.values: dict[str, str] = {}
        self._area = self._select = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "input" and attrs.get("name") and attrs.get("type") not in ("checkbox", "submit"):
            self.values[attrs["name"]] = attrs.get("value") or ""
        elif tag == "textarea":
            self._area = attrs["name"]
            self.values[self._area] = ""
        elif tag == "select":
            self._select = attrs["name"]
            self.values.setdefault(self._select, "")
        elif tag == "option" and self._select and "selected" in attrs:
            self.values[self._select] = attrs.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "textarea":
            self._area = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data):
        if self._area:
            self.values[self._area] += data


def test_saving_the_edit_form_unchanged_keeps_a_none_the_task_set_over_its_templates_rules(client, auth):
    """A task of a template that says "no mutex, any time, no SLA, no quota class" itself keeps saying so."""
    quota_classes.create("heavy-etl", 1, SEED)
    templates.save("nightly-batch", {"mutex_key": "batch-db", "window": {"start": "00:00", "end": "06:00"},
                                     "sla": {"max_start_delay_s": 120}, "quota_class": "heavy-etl"}, SEED)
    task = make_task(name="etl-own", template="nightly-batch", mutex_key=None, window=None, sla=None,
                     quota_class=None)
    inheriting = make_task(name="etl-inherits", template="nightly-batch")
    auth.as_role("operator")
    for each in (task, inheriting):
        reader = _FormReader()
        reader.feed(client.get(f"/tasks/{each.id}/edit").get_data(as_text=True))
        before = tasks.snapshot(reload(each.id))
        assert client.post(f"/tasks/{each.id}/edit", data=reader.values).status_code == 303, each.name
        assert tasks.snapshot(reload(each.id)) == before, each.name
    own = reload(task.id)
    assert (own.mutex_key, own.window, own.sla, own.quota_class) == (None, None, None, None)
    assert reload(inheriting.id).mutex_key == "batch-db"


def test_a_save_over_a_change_made_since_the_form_was_opened_is_refused(client, auth):
    """Two people (or a person and the API) editing one task: the later save does not silently undo the first."""
    task = make_task()
    auth.as_role("operator", "olga")
    reader = _FormReader()
    reader.feed(client.get(f"/tasks/{task.id}/edit").get_data(as_text=True))
    assert reader.values["seen"]
    tasks.edit(reload(task.id), {"cron": "45 9 * * MON-FRI"}, Actor("api"))  # meanwhile, over the API
    response = client.post(f"/tasks/{task.id}/edit", data={**reader.values, "jitter_s": "15"})
    assert response.status_code == 409
    assert "was changed since you opened this form; nothing was saved" in response.get_data(as_text=True)
    kept = reload(task.id)
    assert (kept.cron, kept.jitter_s) == ("45 9 * * MON-FRI", 0)
    reader = _FormReader()
    reader.feed(client.get(f"/tasks/{task.id}/edit").get_data(as_text=True))
    assert client.post(f"/tasks/{task.id}/edit", data={**reader.values, "jitter_s": "15"}).status_code == 303
    assert (reload(task.id).cron, reload(task.id).jitter_s) == ("45 9 * * MON-FRI", 15)
    # A hidden field someone edited: refused, not a 500, and not a save that skips the check (helper 165).
    for edited in ("2026-01-01T00:00", "yesterday", "9" * 100, "-1"):
        refused = client.post(f"/tasks/{task.id}/edit", data={**reader.values, "seen": edited, "jitter_s": "20"})
        assert refused.status_code == 422 and "is not one the page wrote; reload the page" in refused.text, edited
        assert reload(task.id).jitter_s == 15


def test_task_pages_say_when_no_scheduler_runs_so_their_next_firings_will_not_happen(client, auth):
    from console.redis_conn import get_redis
    from console.services.system import leader

    cron_task, event_task = make_task(name="nightly"), make_task(name="on-order", cron=None, event="order.created")
    auth.as_role("viewer")
    for path in ("/tasks/", f"/tasks/{cron_task.id}"):
        page = client.get(path).get_data(as_text=True)
        assert "<strong>No scheduler is running.</strong> Cron tasks do not fire" in page, path
    assert "data-no-scheduler" not in client.get(f"/tasks/{event_task.id}").get_data(as_text=True)  # fires on events
    lock = leader.LeaderLock(get_redis())
    assert lock.acquire_or_renew()
    try:
        assert "data-no-scheduler" not in client.get(f"/tasks/{cron_task.id}").get_data(as_text=True)
    finally:
        lock.release()
