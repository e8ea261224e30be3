"""A quota class's overflow is a conflict the forecast names beforehand, and the early-warning figure counts it."""

from datetime import timedelta

from sqlalchemy import func, select

from console.extensions import db
from console.models import RunEvent
from console.models.reports import ALL_TASKS, report_hours
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.people import tenants
from console.services.reports import rollup
from console.services.scheduling import conflicts, forecast, planner, quota_classes, warnings
from console.services.scheduling import tasks as task_service
from tests.engine.test_quota_class_admission import set_status

ACTOR = Actor("test")


def hourly_in_class(name: str, **more):
    return task_service.register(tenants.find("default"), {
        "name": name, "handler": "demo.noop", "cron": "0 * * * *", "template": None, "quota_class": "heavy-etl",
        **more}, ACTOR)


def conflict_counts() -> tuple[int, int]:
    hours = report_hours.c
    row = db.session.execute(select(func.sum(hours.conflicts), func.sum(hours.conflicts_named))
                             .where(hours.task_id != ALL_TASKS)).one()
    return row[0] or 0, row[1] or 0


def test_a_class_overflow_named_by_the_forecast_counts_as_a_conflict_warned_of(runs, clock):
    quota_classes.create("heavy-etl", 2, ACTOR)
    first, second, third = (hourly_in_class(name) for name in ("nightly-a", "nightly-b", "nightly-c"))
    hour = clock().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)

    # Three runs of a class of two start at the hour: the forecast names each firing that may be the one held back.
    result = forecast.forecast(clock(), hours=1.5)
    named = {(kind, task, at) for kind, _, task, at in result.warnings}
    assert {("quota_class", task.id, hour) for task in (first, second, third)} <= named
    # The task form's warning counts it too (a minute over the class's max_running).
    made = conflicts.created(frozenset(), frozenset(result.warnings))
    assert made is not None and "1 minute over a quota class's max_running" in made.sentence()
    warnings.record(result, clock())

    clock.set(hour + timedelta(seconds=5))
    fired = planner.fire([planner.Firing(task.id, hour) for task in (first, second, third)], ACTOR, clock)
    by_task = {outcome.task_id: outcome.run_id for outcome in fired}
    set_status(by_task[first.id], "running")
    set_status(by_task[second.id], "running")
    assert execute(by_task[third.id], 0, clock=clock) == "deferred:quota_class"
    clock.advance(30)
    assert execute(by_task[third.id], 0, clock=clock) == "deferred:quota_class"
    events = db.session.execute(select(RunEvent.reason).where(RunEvent.run_id == by_task[third.id],
                                                              RunEvent.kind == "deferred")).scalars().all()
    assert events == ["quota_class"]  # once, however often the claim defers it again

    clock.advance(3600)
    rollup.rebuild(clock)
    assert conflict_counts() == (1, 1)  # the Reports page's "Conflict early warning": 1 of 1 named


def test_a_class_overflow_no_forecast_named_counts_as_a_conflict_not_warned_of(runs, clock):
    quota_classes.create("heavy-etl", 1, ACTOR)
    first, second = hourly_in_class("nightly-a"), hourly_in_class("nightly-b")
    hour = clock().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    clock.set(hour)
    fired = planner.fire([planner.Firing(task.id, hour) for task in (first, second)], ACTOR, clock)
    by_task = {outcome.task_id: outcome.run_id for outcome in fired}
    set_status(by_task[first.id], "running")
    assert execute(by_task[second.id], 0, clock=clock) == "deferred:quota_class"
    clock.advance(3600)
    rollup.rebuild(clock)
    assert conflict_counts() == (1, 0)


def test_a_run_whose_wait_switches_away_from_its_class_and_back_counts_as_one_conflict(runs, clock):
    quota_classes.create("heavy-etl", 1, ACTOR)
    first, second = hourly_in_class("nightly-a"), hourly_in_class("nightly-b", policy={"concurrency": 1})
    hour = clock().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    clock.set(hour)
    fired = planner.fire([planner.Firing(task.id, hour) for task in (first, second)], ACTOR, clock)
    by_task = {outcome.task_id: outcome.run_id for outcome in fired}
    set_status(by_task[first.id], "running")
    waiting = by_task[second.id]
    assert execute(waiting, 0, clock=clock) == "deferred:quota_class"
    # An earlier firing of its own task takes the policy's one slot: it waits on that, then on its class again.
    (earlier,) = planner.fire([planner.Firing(second.id, hour - timedelta(hours=1))], ACTOR, clock)
    set_status(earlier.run_id, "running")
    clock.advance(30)
    assert execute(waiting, 0, clock=clock) == "deferred:concurrency"
    set_status(earlier.run_id, "succeeded")
    clock.advance(30)
    assert execute(waiting, 0, clock=clock) == "deferred:quota_class"

    clock.advance(3600)
    rollup.rebuild(clock)
    assert conflict_counts() == (1, 0)  # one firing held back by its class, however often it went back to waiting on it
