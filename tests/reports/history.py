"""A hand-built history whose figures are known: every case the definitions single out, once."""

from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update

from console.extensions import db
from console.models import DeadLetter, OutboxMessage, Run
from console.services.actor import Actor
from console.services.engine import control, handler_kinds
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.scheduling import forecast, planner, sla, tasks, warnings
from console.services.system import delivery_round

SCHEDULER, OPS = Actor("scheduler"), Actor("olga", 1)
START = datetime(2026, 3, 2, 8, 55, tzinfo=UTC)  # a Monday
END = START.replace(hour=10, minute=0, second=10)  # the clock when the history is built
ONE_ATTEMPT = {"max_attempts": 1, "base_delay_s": 1, "jitter": 0}
TWO_ATTEMPTS = {"max_attempts": 2, "base_delay_s": 1, "jitter": 0}


def fire(task, at):
    [outcome] = planner.fire([planner.Firing(task.id, at)], SCHEDULER, lambda: at)
    return outcome.run_id


def _adhoc(clock, params, policy=ONE_ATTEMPT, handler="demo.flaky"):
    run, _ = submit(tenants.find("default"), Actor("api"), handler=handler, params=params, policy=policy,
                    clock=clock)
    return run.id


def _letter(run_id) -> DeadLetter:
    return db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id, DeadLetter.status == "open")
                              ).scalar_one()


def _deliver_alert(after_s: int) -> None:
    """Deliver the dead letter's alert `after_s` after it was raised (as a deliverer would)."""
    pending = db.session.execute(select(OutboxMessage).where(OutboxMessage.kind == "alert",
                                                             OutboxMessage.status == "pending")).scalars()
    [alert] = [row for row in pending if row.payload.get("dead_letter_id")]
    alert.status = "delivered"
    alert.delivered_at = alert.first_sent_at = alert.created_at + timedelta(seconds=after_s)
    db.session.commit()


def build(clock, monkeypatch) -> dict:
    """Make the history; return the ids a test may want to look at."""
    clock.set(START)
    default = tenants.find("default")
    edge = tasks.register(default, {"name": "edge", "handler": "demo.noop", "cron": "*/10 * * * *",
                                    "sla": {"max_start_delay_s": 60}}, OPS)
    office = tasks.register(default, {"name": "office", "handler": "demo.noop", "cron": "0 9 * * *",
                                      "window": {"start": "10:00", "end": "18:00"}}, OPS)
    # 08:55: task-dryrun names the office task's 09:00 firing (outside its window) before it happens.
    warnings.record(forecast.forecast(clock(), hours=2), clock())
    # The mutex pair is created after the forecast: its conflict was not named beforehand.
    holder = tasks.register(default, {"name": "ledger", "handler": "demo.noop", "cron": "0 0 1 1 *",
                                      "mutex_key": "ledger"}, OPS)
    blocked = tasks.register(default, {"name": "ledger-late", "handler": "demo.noop", "cron": "0 0 1 1 *",
                                       "mutex_key": "ledger", "concurrency_policy": "forbid"}, OPS)

    # 09:00 the office task fires outside its window: due at 10:00. The ledger holder starts at once.
    clock.set(START.replace(hour=9, minute=0))
    office_run = fire(office, clock())
    held = fire(holder, clock())
    forbidden = fire(blocked, clock())  # skipped: the ledger holder is still pending
    assert execute(held, 0, clock=clock) == "succeeded"
    # 09:10 fires, starts exactly at its 60 s limit: on time.
    edge_on_time = fire(edge, START.replace(hour=9, minute=10))
    clock.set(START.replace(hour=9, minute=11))
    assert execute(edge_on_time, 0, clock=clock) == "succeeded"
    # 09:20 fires, starts a second past its limit: late, and a breach.
    edge_late = fire(edge, START.replace(hour=9, minute=20))
    clock.set(START.replace(hour=9, minute=21, second=1))
    assert execute(edge_late, 0, clock=clock) == "succeeded"
    sla.check(clock)

    # A run that dies, is replayed, and dies again (its work order stays open).
    clock.set(START.replace(hour=9, minute=30))
    twice_dead = _adhoc(clock, {"fail_times": 9, "code": "gateway_down", "message": "gateway down"})
    assert execute(twice_dead, 0, clock=clock) == "dead"
    _deliver_alert(30)
    clock.advance(60)
    control.replay(_letter(twice_dead), OPS, clock=clock)
    assert execute(twice_dead, 0, clock=clock) == "dead"
    _deliver_alert(45)

    # A run that dies, is replayed 10 minutes later, and succeeds: recovered after 600 s.
    clock.set(START.replace(hour=9, minute=40))
    recovered = _adhoc(clock, {"fail_times": 1, "code": "ledger_locked", "message": "ledger locked"})
    assert execute(recovered, 0, clock=clock) == "dead"
    _deliver_alert(400)
    clock.advance(600)
    control.replay(_letter(recovered), OPS, clock=clock)
    assert execute(recovered, 0, clock=clock) == "succeeded"

    # A retry that works on its own: attempt 1 fails, attempt 2 succeeds.
    retried = _adhoc(clock, {"fail_times": 1}, TWO_ATTEMPTS)
    assert execute(retried, 0, clock=clock) == "retry_wait"
    clock.advance(5)
    assert execute(retried, 1, clock=clock) == "succeeded"

    # A duplicate: the handler succeeds after the engine gave its attempt up; the retry succeeds again.
    duplicate = _adhoc(clock, {}, TWO_ATTEMPTS, handler="demo.noop")

    def given_up_meanwhile(ctx):
        with db.engine.begin() as connection:
            connection.execute(update(Run).where(Run.id == ctx.run_id).values(status="retry_wait",
                                                                              status_reason="worker_lost"))
        return {"charged": True}

    with monkeypatch.context() as patch:
        patch.setattr(handler_kinds, "resolve", lambda handler: handler_kinds.Invocation(given_up_meanwhile))
        assert execute(duplicate, 0, clock=clock) == "stale"
    assert execute(duplicate, 1, clock=clock) == "succeeded"

    # A plain success, and a person's cancel (left out).
    plain = _adhoc(clock, {}, handler="demo.noop")
    assert execute(plain, 0, clock=clock) == "succeeded"
    control.cancel(db.session.get(Run, _adhoc(clock, {}, handler="demo.noop")), OPS, clock=clock)

    # 10:00:10 the office run starts, 10 s after its window opened: on time.
    clock.set(END)
    assert execute(office_run, 0, clock=clock) == "succeeded"
    sla.check(clock)
    delivery_round.tick(clock)  # closes the recovered run's work order
    return {"edge": edge.id, "office": office.id, "twice_dead": twice_dead, "recovered": recovered,
            "duplicate": duplicate, "forbidden": forbidden, "edge_late": edge_late, "office_run": office_run}
