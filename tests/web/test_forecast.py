"""The conflict forecast page (task-dryrun's forecast in the console) and the task form's warning on save."""

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import func, select

from console.domain.clock import FrozenClock
from console.extensions import db
from console.models import ForecastWarning
from console.services.actor import Actor
from console.services.people import tenants
from console.services.scheduling import conflicts, quota_classes, tasks
from console.services.scheduling.forecast import _Firing, _overlaps, forecast
from tests.factories import make_tenant
from tests.helpers import assert_marked
from tests.web.test_tasks import form_body

SEED = Actor("seed")


def text(response) -> str:
    """The page with its whitespace folded, as a reader sees it."""
    return re.sub(r"\s+", " ", response.get_data(as_text=True))


def register(tenant=None, **fields):
    body = {"name": "export", "handler": "demo.noop", "cron": "0 * * * *", "timezone": "UTC", **fields}
    return tasks.register(tenant or tenants.ensure_default(), body, SEED)


def test_the_page_lists_mutex_overlaps_window_deferrals_and_quota_pressure(client, auth):
    register(name="export", mutex_key="ledger")
    register(name="reconcile", mutex_key="ledger", concurrency_policy="forbid")
    register(name="nightly", cron="0 * * * *", window={"start": "01:00", "end": "02:00"})
    tenant = tenants.find("default")
    tenant.max_running = 1
    db.session.commit()
    auth.as_role("viewer")
    page = text(client.get("/tasks/forecast"))
    assert "3 scheduled tasks, 72 firings" in page
    assert "<code>ledger</code>" in page and "second firing skipped" in page
    # The 24 overlaps of the same two tasks are one row that counts them.
    assert page.count("<code>ledger</code>") == 1 and '<td>export</td><td>reconcile</td><td class="num">24</td>' in page
    # nightly: every hour but the window's is deferred, in one run per opening (the page said runs were made each)
    openings = re.search(r'<td class="num">23</td> <td class="num">(\d+)</td>', page)
    assert openings and int(openings.group(1)) in (1, 2)  # the day's opening, and the next one's after it
    assert '<div class="value">23</div><div class="label">firings outside their window</div>' in page
    assert "Quota pressure" in page and '<td class="num">1</td></tr>' in page
    week = text(client.get("/tasks/forecast?horizon=7d"))
    assert "3 scheduled tasks, 504 firings" in week
    # Looking writes nothing: only task-dryrun keeps forecasts for the reports.
    assert db.session.execute(select(func.count()).select_from(ForecastWarning)).scalar_one() == 0


def test_the_page_refuses_a_bad_horizon_and_an_unknown_tenant(client, auth):
    auth.as_role("viewer")
    assert client.get("/tasks/forecast?horizon=1y").status_code == 422
    assert client.get("/tasks/forecast?tenant=nope").status_code == 404


def test_a_tenant_limited_person_forecasts_only_their_tenant(client, auth):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    register(acme, name="acme-export")
    register(globex, name="globex-secret", window={"start": "01:00", "end": "02:00"})
    auth.make_user("ada", "viewer", tenant=acme)
    assert auth.login("ada").status_code == 302
    page = text(client.get("/tasks/forecast"))
    assert "1 scheduled task of acme" in page and "globex" not in page
    # Naming another tenant is refused, as on Runs and the DLQ, not quietly replaced by her own.
    refused = client.get("/tasks/forecast?tenant=globex")
    assert refused.status_code == 403 and "you see only tenant acme&#39;s tasks; remove tenant=globex" in text(refused)
    assert "globex-secret" not in text(refused)


@pytest.mark.parametrize("typed", ["0", "abc", "100001", "٣", "9" * 40])
def test_a_bad_crowded_at_is_said_beside_its_box_and_the_forecast_counts_50(client, auth, typed):
    register(name="export")
    auth.as_role("viewer")
    response = client.get("/tasks/forecast", query_string={"crowded": typed})
    page = text(response)
    assert response.status_code == 422 and "1 scheduled task" in page
    assert_marked(page, "input", "crowded", "Crowded at is a whole number from 1 to 100,000")
    assert f'value="{typed}"' in page and "Minutes with 50 or more starts" in page


def test_tasks_links_to_the_forecast(client, auth):
    auth.as_role("viewer")
    assert 'href="/tasks/forecast"' in client.get("/tasks").get_data(as_text=True)


def test_saving_a_task_that_creates_a_mutex_overlap_warns_after_the_save(client, auth):
    register(name="export", mutex_key="ledger")
    other = register(name="reconcile", cron="30 * * * *")
    auth.as_role("operator")
    saved = client.post(f"/tasks/{other.id}/edit", data=form_body(other, auth.csrf(), cron="0 * * * *",
                                                                   mutex_key="ledger"), follow_redirects=True)
    page = text(saved)
    assert saved.status_code == 200 and "Saved reconcile." in page  # the save is not refused
    assert "This change creates conflicts in the next 24 h: 24 mutex overlaps" in page
    assert 'href="/tasks/forecast?tenant=default"' in page
    # Saving it again creates nothing new: no warning.
    again = client.post(f"/tasks/{other.id}/edit", data=form_body(tasks.get(other.id, None), auth.csrf()),
                        follow_redirects=True)
    again = text(again)
    assert "Saved reconcile." in again and "creates conflicts" not in again


def test_a_new_task_outside_its_window_warns(client, auth):
    auth.as_role("operator")
    response = client.post("/tasks/new", data={
        "csrf_token": auth.csrf("/tasks/new"), "tenant": "default", "name": "nightly", "handler": "demo.noop",
        "params": "", "cron": "0 * * * *", "timezone": "UTC", "event": "", "policy": "", "policy_overrides": "",
        "mutex_key": "", "concurrency_policy": "allow", "window": '{"start": "01:00", "end": "02:00"}',
        "jitter_s": "0", "debounce_s": "0", "misfire_grace_s": "300", "sla": ""}, follow_redirects=True)
    page = text(response)
    assert "Registered nightly." in page and "23 firings outside their window (first at" in page


def test_a_large_tenant_forecasts_only_the_task_and_its_mutex_partners(app, monkeypatch):
    monkeypatch.setattr(conflicts, "WHOLE_TENANT_UP_TO", 1)
    a, b = register(name="a", mutex_key="k"), register(name="b", mutex_key="k")
    register(name="c", window={"start": "01:00", "end": "02:00"})  # not a partner: not forecast
    tenant = tenants.find("default")
    marks = conflicts.marks(tenant, a.created_at, mutex_key="k", task_id=a.id)
    # A mutex overlap's mark names both of its tasks: (mutex, first task, second task, the second's start).
    assert {kind for kind, *_ in marks} == {"mutex"} and {task for _, *tasks, _ in marks for task in tasks} == {
        a.id, b.id}


def test_firings_at_one_moment_pair_in_task_id_order_as_the_planner_fires_them():
    start = datetime(2026, 12, 2, 10, tzinfo=UTC)
    older = SimpleNamespace(id=1, tenant_id=1, name="export", concurrency_policy="allow", mutex_key="ledger")
    newer = SimpleNamespace(id=2, tenant_id=1, name="reconcile", concurrency_policy="forbid", mutex_key="ledger")
    # The database handed the tasks over newest first (PostgreSQL promises no order).
    planned = [_Firing(task, start, start, start + timedelta(minutes=5), "p95") for task in (newer, older)]
    [overlap] = _overlaps(planned, [])
    assert overlap["first"].startswith("export") and overlap["consequence"] == "second firing skipped"


def test_a_skipped_firing_blocks_nothing_and_takes_no_slot(app):
    # etl-1 runs 02:00-03:00; etl-2 (02:30, forbid) is skipped, so it holds neither the key nor a quota class slot:
    # etl-3 at 03:15 finds the key free, and the class never has two runs.
    quota_classes.create("warehouse", 1, SEED)
    hour = {"timeout_s": 3600}
    first = register(name="etl-1", cron="0 2 * * *", mutex_key="etl", policy=hour, quota_class="warehouse")
    second = register(name="etl-2", cron="30 2 * * *", mutex_key="etl", concurrency_policy="forbid", policy=hour,
                      quota_class="warehouse")
    register(name="etl-3", cron="15 3 * * *", mutex_key="etl", concurrency_policy="forbid", policy=hour)
    result = forecast(datetime(2026, 12, 2, 1, tzinfo=UTC), 12)
    assert [(o["first_task_id"], o["second_task_id"], o["consequence"]) for o in result.mutex_overlaps] == [
        (first.id, second.id, "second firing skipped")]
    assert result.class_overflows == []


def test_a_replaced_run_holds_the_key_only_until_it_is_cancelled(app):
    hour = {"timeout_s": 3600}
    register(name="etl-1", cron="0 2 * * *", mutex_key="etl", policy=hour)
    second = register(name="etl-2", cron="10 2 * * *", mutex_key="etl", concurrency_policy="replace", policy={
        "timeout_s": 600})
    register(name="etl-3", cron="30 2 * * *", mutex_key="etl", concurrency_policy="forbid", policy=hour)
    result = forecast(datetime(2026, 12, 2, 1, tzinfo=UTC), 12)
    # etl-1 is cancelled at 02:10 and etl-2 ends at 02:20: etl-3 at 02:30 is blocked by neither.
    assert [(o["second_task_id"], o["consequence"]) for o in result.mutex_overlaps] == [
        (second.id, "first run cancelled")]


def test_a_long_run_still_holds_the_key_after_a_shorter_one_beside_it_ends(app):
    long_run = register(name="etl-1", cron="0 2 * * *", mutex_key="etl", policy={"timeout_s": 3600})
    register(name="etl-2", cron="10 2 * * *", mutex_key="etl", policy={"timeout_s": 600})  # allow: both run
    late = register(name="etl-3", cron="30 2 * * *", mutex_key="etl", concurrency_policy="forbid")
    result = forecast(datetime(2026, 12, 2, 1, tzinfo=UTC), 12)
    # etl-2 has ended by 02:30, but etl-1 runs until 03:00: etl-3 is skipped, and the page says by whom.
    assert [(o["first_task_id"], o["second_task_id"], o["consequence"]) for o in result.mutex_overlaps][-1] == (
        long_run.id, late.id, "second firing skipped")


def test_a_task_still_running_at_its_own_next_firing_is_said_so_not_paired_with_itself(client, auth):
    # The planner checks a firing's mutex key against every active run that holds it, the task's own included:
    # under forbid a run that outlasts the cron interval makes the next firing skipped. A real warning, in words.
    slow = register(name="export", cron="*/5 * * * *", mutex_key="ledger", concurrency_policy="forbid",
                    policy={"timeout_s": 600})
    result = forecast(slow.created_at, 1)
    assert result.mutex_overlaps and all(o["same_task"] for o in result.mutex_overlaps)
    assert {o["consequence"] for o in result.mutex_overlaps} == {"next firing skipped"}
    assert {(kind, task) for kind, _, task, _ in result.warnings} == {("mutex", slow.id)}  # still named for the figure
    auth.as_role("viewer")
    page = text(client.get("/tasks/forecast"))
    assert "<td>export</td><td>export</td>" not in page
    assert re.search(r"<td>export</td><td>its own next firing, while its run from the one before is still going"
                     r"</td><td class=\"num\">\d+</td>", page), page
    assert "next firing skipped" in page


def test_a_run_outlasting_several_firings_counts_each_overlap_in_the_save_as_on_the_page(app):
    """An every-minute task whose run lasts 5 minutes meets its key held at four firings of every five: a save said
    288 overlaps (one per held run) where the forecast page counted 1,152."""
    task = register(name="self", cron="* * * * *", mutex_key="self", concurrency_policy="forbid",
                    policy={"timeout_s": 300})
    marks = conflicts.marks(tenants.find("default"), task.created_at, mutex_key="self", task_id=task.id)
    overlaps = forecast(task.created_at, conflicts.HOURS, "default").mutex_overlaps
    assert len([mark for mark in marks if mark[0] == "mutex"]) == len(overlaps) > 1000


def test_the_save_warning_counts_mutex_overlaps_as_the_forecast_page_does(client, auth, monkeypatch):
    # Half past: the next 24 h hold 24 whole hours of both tasks, for the save and for the page alike.
    half_past = FrozenClock(datetime(2026, 12, 2, 10, 30, tzinfo=UTC))
    for module in ("views", "editing"):  # the forecast page's clock and the save's
        monkeypatch.setattr(f"console.web.tasks.{module}.utcnow", half_past)
    register(name="export", mutex_key="ledger")  # at :00 for its 300 s timeout
    other = register(name="reconcile", cron="30 * * * *")
    auth.as_role("operator")
    # At :03 it overlaps export's run of the same hour: one overlap of two firings in two different minutes.
    saved = text(client.post(f"/tasks/{other.id}/edit", data=form_body(other, auth.csrf(), cron="3 * * * *",
                                                                        mutex_key="ledger"), follow_redirects=True))
    assert "This change creates conflicts in the next 24 h: 24 mutex overlaps (first at" in saved, saved
    forecast_page = text(client.get("/tasks/forecast?tenant=default"))
    assert '<div class="value">24</div><div class="label">mutex overlaps</div>' in forecast_page
    assert '<td>export</td><td>reconcile</td><td class="num">24</td>' in forecast_page
