"""`rebound seed-demo --runs N --days D --tasks T`: a report history the Reports page has something to show for."""

import json
from datetime import UTC, timedelta

from sqlalchemy import func, select

from console.extensions import db
from console.models import DeadLetter, SlaBreach, Task, WorkOrder
from console.services.system.demo_reports import seed_report_history
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


def test_a_historys_work_orders_close_when_their_last_letter_recovered_not_at_seeding(app, clock):
    for name in ("acme", "globex", "initech"):  # a demo's tenants: groups of a few letters, some wholly recovered
        make_tenant(name)
    seed_report_history(4000, days=14, tasks=6, clock=clock)  # as a fresh demo seeds it
    closed = db.session.execute(select(WorkOrder).where(WorkOrder.status == "closed")).scalars().all()
    assert closed, "some error groups were wholly replayed and recovered"
    for order in closed:
        last = db.session.execute(select(func.max(DeadLetter.resolved_at)).where(
            DeadLetter.work_order_id == order.id)).scalar_one()
        assert as_utc(order.closed_at) == as_utc(last) + timedelta(seconds=2) < clock()
    still_open = db.session.execute(select(func.count()).select_from(WorkOrder).where(
        WorkOrder.status == "open")).scalar_one()
    assert still_open, "groups with a letter left open stay open"
