"""The rollups kept a minute at a time equal the rollups rebuilt from the runs, on a randomised history."""

import random
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from console.extensions import db
from console.models import DeadLetter, OutboxMessage, Run, Tenant
from console.models.reports import ALL_TASKS, report_days, report_error_days, report_error_hours, report_hours
from console.services.actor import Actor
from console.services.engine import control
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.reports import rollup
from console.services.scheduling import forecast, planner, sla, tasks, warnings
from console.services.system.maintenance import MAINTENANCE

SCHEDULER, OPS = Actor("scheduler"), Actor("olga", 1)
TABLES = (report_hours, report_days, report_error_hours, report_error_days)


def snapshot() -> dict:
    db.session.expire_all()
    return {table.name: sorted(tuple(row) for row in db.session.execute(select(table)).all()) for table in TABLES}


def test_the_rollups_job_runs_every_minute_with_a_stable_id():
    [job] = [job for job in MAINTENANCE if job.id == "rollups"]
    assert (job.func, job.seconds) == ("console.services.reports.rollup:tick", 60)


class History:
    """Random work done through the services at a moving clock: firings, attempts, replays, checks, alerts."""

    def __init__(self, rand: random.Random, clock):
        self.rand, self.clock = rand, clock
        small = Tenant(name="small", max_queued=2)
        db.session.add(small)
        db.session.commit()
        default = tenants.find("default")
        self.tasks = [
            tasks.register(default, {"name": "hourly", "handler": "demo.flaky", "cron": "0 * * * *",
                                     "params": {"fail_times": 1}, "sla": {"max_start_delay_s": 30}}, OPS),
            tasks.register(default, {"name": "ledger", "handler": "demo.noop", "cron": "*/5 * * * *",
                                     "mutex_key": "ledger", "concurrency_policy": "forbid"}, OPS),
            tasks.register(default, {"name": "ledger-b", "handler": "demo.noop", "cron": "*/5 * * * *",
                                     "mutex_key": "ledger", "concurrency_policy": "replace"}, OPS),
            tasks.register(default, {"name": "office", "handler": "demo.noop", "cron": "0 * * * *",
                                     "window": {"start": "09:00", "end": "17:00"}}, OPS),
            tasks.register(small, {"name": "crowded", "handler": "demo.noop", "cron": "* * * * *",
                                   "sla": {"max_start_delay_s": 120, "deadline_s": 300}}, OPS),
        ]

    def step(self) -> None:
        rand, clock = self.rand, self.clock
        clock.advance(rand.choice((1, 7, 30, 90, 400, 1800, 3700)))
        action = rand.random()
        if action < 0.3:
            task = rand.choice(self.tasks)
            lag = rand.choice((0, 0, 5, 45, 200))
            [fired] = planner.fire([planner.Firing(task.id, clock() - timedelta(seconds=lag))], SCHEDULER, clock)
            if fired.run_id and rand.random() < 0.6:  # a free worker takes it at once
                execute(fired.run_id, 0, clock=clock)
        elif action < 0.45:
            submit(tenants.find("default"), Actor("api"), handler="demo.flaky",
                   params={"fail_times": rand.choice((0, 1, 2, 3)), "code": rand.choice(("e1", "e2"))},
                   policy={"max_attempts": 2, "base_delay_s": 1, "jitter": 0}, clock=clock)
        elif action < 0.75:
            waiting = db.session.execute(select(Run.id, Run.attempt).where(
                Run.status.in_(("pending", "retry_wait")))).all()
            if waiting:
                execute(*rand.choice(waiting), clock=clock)
        elif action < 0.82:
            letters = db.session.execute(select(DeadLetter).where(DeadLetter.status == "open")).scalars().all()
            if letters:
                run, _ = control.replay(rand.choice(letters), OPS, clock=clock)
                if rand.random() < 0.7:
                    execute(run.id, 0, clock=clock)
        elif action < 0.88:
            sla.check(clock)
        elif action < 0.94:
            # A deliverer sends what is due now.
            db.session.execute(update(OutboxMessage).where(OutboxMessage.status == "pending")
                               .values(status="delivered", delivered_at=clock(), first_sent_at=clock()))
            db.session.commit()
        else:
            warnings.record(forecast.forecast(clock(), hours=2), clock())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_rollups_equal_a_rebuild_from_the_runs(app, clock, seed):
    rand = random.Random(seed)
    history = History(rand, clock)
    ticks = 0
    for _ in range(260):
        history.step()
        if rand.random() < 0.25:
            rollup.tick(clock)
            ticks += 1
    while rollup.through() < clock():  # a gap longer than a pass catches up a day at a time
        rollup.tick(clock)
    kept = snapshot()
    totals = [row for row in kept["report_days"] if row[2] == ALL_TASKS]
    counted = {name: sum(row[index] for row in totals)
               for index, name in enumerate(c.name for c in report_days.c) if index >= 4}
    # A tenant's total row is the sum of its other rows.
    finished = [c.name for c in report_days.c].index("finished")
    assert counted["finished"] == sum(row[finished] for row in kept["report_days"] if row[2] != ALL_TASKS)
    # The history exercised what the figures count.
    for name in ("starts", "on_time", "finished", "succeeded", "retried", "retry_succeeded", "attempts_failed",
                 "dead", "dead_letters", "recovered", "alerts", "breaches", "conflicts"):
        assert counted[name] > 0, name
    assert ticks > 20
    rollup.rebuild(clock)
    assert snapshot() == kept


def rebuilt_history(seed: int, steps: int, clock) -> dict:
    """Do a random history's steps, rebuild the rollups from it, and return them."""
    history = History(random.Random(seed), clock)
    for _ in range(steps):
        history.step()
    rollup.rebuild(clock)
    return snapshot()


def test_a_pass_recomputes_its_window_so_running_it_twice_changes_nothing(app, clock):
    before = rebuilt_history(9, 80, clock)
    rollup.tick(clock)
    rollup.tick(clock)
    assert snapshot() == before


def test_a_rebuild_stopped_half_way_leaves_every_day_with_its_figures(app, clock):
    # It emptied the tables first and filled them a day at a time: a Ctrl-C (or `| head`) left the reports reading
    # 0 of 0 for every day not yet done, with no warning (helper 172).
    before = rebuilt_history(5, 150, clock)
    assert len({row[0] for row in before["report_days"]}) >= 2

    def interrupt(day):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rollup.rebuild(clock, progress=interrupt)
    db.session.rollback()
    assert snapshot() == before
    # Rows outside the runs' span (left by runs purged since) still go at a whole rebuild's end.
    stale = min(row[0] for row in before["report_days"]) - timedelta(days=3)
    db.session.execute(report_days.insert().values(**{**dict(zip([c.name for c in report_days.c],
                                                                 before["report_days"][0], strict=True)),
                                                      "day": stale}))
    db.session.commit()
    rollup.rebuild(clock)
    assert snapshot() == before
