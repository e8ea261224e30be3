"""`rebound task-dryrun`: the forecast of the next hours names mutex overlaps, quota overflows, deferrals, crowds.

The command forecasts from the real current time, so every cron here fires in any 2-hour horizon.
"""

import json
from datetime import datetime, time, timedelta

import pytest

from console.extensions import db
from console.models import Tenant
from console.services.actor import Actor
from console.services.people import tenants
from console.services.scheduling import tasks

ACTOR = Actor("test")


def register(name: str, cron: str, tenant: Tenant | None = None, **fields):
    return tasks.register(tenant or tenants.find("default"), {"name": name, "handler": "demo.noop", "cron": cron,
                                                              **fields}, ACTOR)


def dryrun(app, *args: str) -> dict:
    result = app.test_cli_runner().invoke(args=["task-dryrun", "--json", "--hours", "2", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_empty_schedule_forecasts_nothing(app):
    report = dryrun(app)
    assert (report["tasks"], report["firings"]) == (0, 0)
    for key in ("mutex_overlaps", "quota_overflows", "outside_window", "crowded_minutes"):
        assert report[key] == [], key
    start, end = datetime.fromisoformat(report["start"]), datetime.fromisoformat(report["end"])
    assert end - start == timedelta(hours=2)


def test_tasks_sharing_a_mutex_whose_timeouts_overlap_are_reported(app):
    register("ledger-a", "*/10 * * * *", mutex_key="ledger", policy={"timeout_s": 600})
    register("ledger-b", "5,15,25,35,45,55 * * * *", mutex_key="ledger", policy={"timeout_s": 600},
             concurrency_policy="forbid")
    report = dryrun(app)
    assert report["tasks"] == 2
    assert 22 <= report["firings"] <= 24  # one firing every 5 minutes
    overlaps = report["mutex_overlaps"]
    assert overlaps, report
    assert all(o["mutex_key"] == "ledger" and o["duration_basis"] == "timeout" for o in overlaps)
    skipped = [o for o in overlaps if o["consequence"] == "second firing skipped"]
    assert skipped, overlaps
    # a run of 10 minutes started 5 minutes before the next one overlaps it by 5 minutes
    assert all(o["first"].startswith("ledger-a at ") and o["second"].startswith("ledger-b at ") for o in skipped)
    assert all(o["overlap_s"] == 300 for o in overlaps)
    both = [o for o in overlaps if o["consequence"] == "both run"]
    assert all(o["second"].startswith("ledger-a at ") for o in both)


def test_tasks_that_finish_before_the_next_firing_do_not_overlap(app):
    register("ledger-a", "*/10 * * * *", mutex_key="ledger", policy={"timeout_s": 120})
    register("ledger-b", "5,15,25,35,45,55 * * * *", mutex_key="ledger", policy={"timeout_s": 120},
             concurrency_policy="forbid")
    assert dryrun(app)["mutex_overlaps"] == []


def test_tenant_expected_to_run_more_than_max_running_is_a_quota_overflow(app):
    tiny = Tenant(name="tiny", max_running=1)
    db.session.add(tiny)
    db.session.commit()
    register("export-a", "* * * * *", tenant=tiny, policy={"timeout_s": 3600})
    register("export-b", "* * * * *", tenant=tiny, policy={"timeout_s": 3600})
    register("roomy", "* * * * *", policy={"timeout_s": 60})  # the default tenant allows 100 at once
    report = dryrun(app)
    overflows = report["quota_overflows"]
    assert overflows, report
    assert {o["tenant"] for o in overflows} == {"tiny"}
    assert all(o["max_running"] == 1 and o["expected_running"] > 1 for o in overflows)


def test_firings_outside_their_window_are_deferred_to_its_next_opening(app):
    task = register("saturday-night", "* * * * *", window={"days": ["sat"], "start": "01:00", "end": "02:00"})
    report = dryrun(app)
    entries = report["outside_window"]
    # 2 hours of firings every minute cannot all fall inside a 1-hour window
    assert len(entries) >= 59, len(entries)
    for entry in entries:
        assert (entry["task_id"], entry["task"]) == (task.id, "saturday-night")
        firing, deferred = datetime.fromisoformat(entry["firing"]), datetime.fromisoformat(entry["deferred_to"])
        assert deferred > firing
        assert deferred.utcoffset() == timedelta(0)
        assert deferred.weekday() == 5 and deferred.time() == time(1, 0), entry
        assert deferred - firing <= timedelta(days=7)
    # They wait in one run for the opening, as the planner makes them (windows.opening_key): no crowd of starts.
    assert not any(minute["starts"] > 1 for minute in report["crowded_minutes"]), report["crowded_minutes"]


def test_sixty_tasks_on_the_hour_make_a_crowded_minute(app):
    for number in range(60):
        register(f"hourly-{number:02d}", "0 * * * *")
    report = dryrun(app, "--crowded", "50")
    assert report["tasks"] == 60
    crowded = report["crowded_minutes"]
    assert crowded, report
    assert any(minute["starts"] >= 60 for minute in crowded)
    for minute in crowded:
        assert datetime.fromisoformat(minute["minute"]).minute == 0


def test_paused_and_deleted_tasks_are_left_out(app):
    paused = register("paused", "* * * * *")
    tasks.set_paused(paused, True, ACTOR)
    tasks.delete(register("deleted", "* * * * *"), ACTOR)
    register("event-only", None, event="order.created")
    assert (dryrun(app)["tasks"], dryrun(app)["firings"]) == (0, 0)


def test_table_output_has_every_section(app):
    register("ledger-a", "*/10 * * * *", mutex_key="ledger", policy={"timeout_s": 600})
    register("ledger-b", "5,15,25,35,45,55 * * * *", mutex_key="ledger", policy={"timeout_s": 600},
             concurrency_policy="forbid")
    register("saturday-night", "* * * * *", window={"days": ["sat"], "start": "01:00", "end": "02:00"})
    result = app.test_cli_runner().invoke(args=["task-dryrun", "--hours", "2"])
    assert result.exit_code == 0, result.output
    for title in ("Mutex overlaps", "Quota overflows", "Firings outside their window", "Minutes with 50+ starts"):
        assert title in result.output, title
    assert "cron tasks" in result.output
    assert "second firing skipped" in result.output and "saturday-night" in result.output


def test_each_forecast_keeps_what_it_named_and_a_repeat_keeps_the_earlier_time(app):
    from sqlalchemy import select

    from console.models import ForecastWarning

    first = register("ledger-a", "*/10 * * * *", mutex_key="ledger", policy={"timeout_s": 600})
    second = register("ledger-b", "5,15,25,35,45,55 * * * *", mutex_key="ledger", policy={"timeout_s": 600},
                      concurrency_policy="forbid")
    night = register("saturday-night", "* * * * *", window={"days": ["sat"], "start": "01:00", "end": "02:00"})
    report = dryrun(app)
    rows = db.session.execute(select(ForecastWarning)).scalars().all()
    mutex = [row for row in rows if row.kind == "mutex"]
    assert {row.task_id for row in mutex} == {first.id, second.id}
    assert all(row.at.second == 0 and row.at.minute % 5 == 0 for row in mutex)
    window = [row for row in rows if row.kind == "window"]
    assert {row.task_id for row in window} == {night.id} and len(window) == len(report["outside_window"])
    made = {row.id: row.made_at for row in rows}
    dryrun(app)
    db.session.expire_all()
    again = db.session.execute(select(ForecastWarning).where(ForecastWarning.id.in_(made))).scalars().all()
    assert {row.id: row.made_at for row in again} == made


@pytest.mark.parametrize(("args", "says"), [
    (["--hours", "-1"], "--hours"), (["--hours", "0"], "--hours"), (["--crowded", "0"], "--crowded"),
    (["--hours", "nan"], "nan is not a number of hours"),  # it was a traceback (helper 109)
    (["--tenant", "nosuch"], "no tenant named 'nosuch'"), (["--task", "9999"], "no task with id 9999"),
])
def test_a_horizon_threshold_tenant_or_task_that_can_forecast_nothing_is_a_usage_error(app, args, says):
    result = app.test_cli_runner().invoke(args=["task-dryrun", *args])
    assert result.exit_code == 2 and says in result.output, result.output


@pytest.mark.parametrize("task", ["9" * 20, "abc", "0", "٣"])
def test_a_task_id_no_row_can_have_is_a_usage_error(app, task):
    result = app.test_cli_runner().invoke(args=["task-dryrun", "--task", task])
    assert result.exit_code == 2 and "is not an id: ids are whole numbers from 1 to 2147483647" in result.output


def test_a_forecast_cut_short_at_its_firing_limit_says_so(app):
    # A year of an every-minute task stopped at 20,000 firings (14 days), with nothing said (helper 109).
    task = register("heartbeat", "* * * * *")
    result = app.test_cli_runner().invoke(args=["task-dryrun", "--json", "--hours", "400"])
    [cut] = json.loads(result.output)["cut_short"]
    assert (cut["task_id"], cut["firings"]) == (task.id, 20_000)
    text = app.test_cli_runner().invoke(args=["task-dryrun", "--hours", "400"]).output
    assert "Cut short: at most 20,000 firings a task are forecast" in text and "heartbeat" in text
    assert json.loads(app.test_cli_runner().invoke(args=["task-dryrun", "--json"]).output)["cut_short"] == []
