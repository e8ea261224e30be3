"""`rebound seed-demo --runs N --days D --tasks T`: a report history the Reports page has something to show for."""

import json
from datetime import UTC, timedelta
from itertools import pairwise

from sqlalchemy import func, select

from console.extensions import db
from console.models import AuditEntry, DeadLetter, SlaBreach, Task, WorkOrder
from console.services.system.demo_reports import seed_report_history
from console.services.workorders.changes import SETTLED_NOTE
from tests.factories import make_tenant


def as_utc(moment):
    """SQLite gives naive datetimes back, PostgreSQL aware ones."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def test_a_seeded_report_history_is_rolled_up_and_reads_as_figures(app):
    runner = app.test_cli_runner()
    seeded = runner.invoke(args=["seed-demo", "--runs", "3000", "--days", "3", "--tasks", "5"])
    assert seeded.exit_code == 0, seeded.output
    assert "Report history: 3000 runs over 3 days, 5 tasks" in seeded.output
    assert db.session.execute(select(func.count()).select_from(Task).where(Task.paused.is_(True))).scalar_one() == 5
    breaches = db.session.execute(select(func.count()).select_from(SlaBreach)).scalar_one()
    letters = db.session.execute(select(func.count()).select_from(DeadLetter)).scalar_one()
    report = json.loads(runner.invoke(args=["sla-report", "--period", "7d", "--format", "json"]).stdout)["figures"]
    assert report["sla_breaches"]["value"] == breaches > 0
    assert report["dead_letters_created"]["value"] == letters > 0
    assert 0.9 < report["on_time_rate"]["value"] < 1 and 0.9 < report["execution_success_rate"]["value"] < 1
    assert report["dead_letters_recovered"]["value"] > 0 and report["alert_latency_p95_s"]["value"] is not None


def _settled_at(letter: DeadLetter):
    """When a history letter stopped needing work: its replayed run's success (2 s on) or its discard."""
    return as_utc(letter.resolved_at) + timedelta(seconds=2 if letter.status == "replayed" else 0)


def _fortnight(clock):
    for name in ("acme", "globex", "initech"):  # a demo's tenants: groups of a few letters, some wholly settled
        make_tenant(name)
    seed_report_history(4000, days=14, tasks=6, clock=clock, chronological=True)  # as a fresh demo seeds it


def test_a_historys_work_orders_close_when_their_last_letter_settled_not_at_seeding(app, clock):
    _fortnight(clock)
    closed = db.session.execute(select(WorkOrder).where(WorkOrder.status == "closed")).scalars().all()
    assert closed, "some error groups were wholly replayed and recovered, or discarded"
    for order in closed:
        letters = db.session.execute(select(DeadLetter).where(DeadLetter.work_order_id == order.id)).scalars().all()
        assert {letter.status for letter in letters} <= {"replayed", "discarded"}
        assert as_utc(order.closed_at) == max(_settled_at(letter) for letter in letters) < clock()
        assert (order.closed_by, order.close_note) == ("system", SETTLED_NOTE)
    still_open = db.session.execute(select(func.count()).select_from(WorkOrder).where(
        WorkOrder.status == "open")).scalar_one()
    assert still_open, "groups with a letter left open stay open"
    # Written as it ended, like the rest of the history: no close audited now with a fortnight-old date.
    assert db.session.execute(select(func.count()).select_from(AuditEntry).where(
        AuditEntry.action.like("work_order.%"))).scalar_one() == 0


def test_a_groups_next_letter_after_its_work_order_closed_opens_a_new_one_as_the_engine_does(app, clock):
    _fortnight(clock)
    discarded = db.session.execute(select(DeadLetter).where(DeadLetter.status == "discarded")).scalars().all()
    assert discarded and all(letter.resolution_note and letter.resolved_by for letter in discarded)
    groups: dict[tuple, list[WorkOrder]] = {}
    in_time = db.session.execute(select(WorkOrder).order_by(WorkOrder.created_at, WorkOrder.id)).scalars().all()
    assert [order.id for order in in_time] == sorted(order.id for order in in_time), "numbered as they opened"
    for order in in_time:
        groups.setdefault((order.tenant_id, order.fingerprint), []).append(order)
        letters = db.session.execute(select(DeadLetter).where(DeadLetter.work_order_id == order.id)).scalars().all()
        assert order.dead_letter_count == len(letters) > 0
        assert as_utc(order.created_at) == min(as_utc(letter.created_at) for letter in letters)
        if order.closed_at is not None:  # each of its letters came while it was open
            assert all(as_utc(letter.created_at) < as_utc(order.closed_at) for letter in letters)
    assert any(len(orders) > 1 for orders in groups.values()), "a group failed again after its order closed"
    for orders in groups.values():  # one open order per group at a time: each closed before the next opened
        assert all(as_utc(older.closed_at) <= as_utc(newer.created_at) for older, newer in pairwise(orders))
    # So a manager's week holds orders both closed and not: the figure is neither 0 % nor vacuous.
    week = [order for orders in groups.values() for order in orders
            if as_utc(order.created_at) >= clock() - timedelta(days=7)]
    assert {order.status for order in week} == {"open", "closed"}


def test_a_second_history_joins_the_work_orders_still_open_of_its_groups(app, clock):
    # It opened a second one beside each: the unique index refused it, a traceback after the runs were written.
    _fortnight(clock)
    seed_report_history(1000, days=3, tasks=6, clock=clock, chronological=True)
    open_letters = db.session.execute(select(DeadLetter.work_order_id, func.count()).where(DeadLetter.status == "open")
                                      .group_by(DeadLetter.work_order_id)).all()
    assert open_letters and all(order_id is not None for order_id, _ in open_letters)
    doubled = db.session.execute(select(WorkOrder.tenant_id, WorkOrder.fingerprint).where(
        WorkOrder.status == "open").group_by(WorkOrder.tenant_id, WorkOrder.fingerprint).having(func.count() > 1)).all()
    assert doubled == []
    for order in db.session.execute(select(WorkOrder).where(WorkOrder.status == "open")).scalars():
        letters = db.session.execute(select(func.count()).select_from(DeadLetter).where(
            DeadLetter.work_order_id == order.id)).scalar_one()
        assert order.dead_letter_count == letters
