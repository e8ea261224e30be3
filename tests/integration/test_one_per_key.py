"""One active work order per error group and one pending message per key, held by unique indexes, not by luck."""

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.exc import IntegrityError

from console import create_app
from console.db.migrations import upgrade
from console.extensions import db
from console.models import DeadLetter, OutboxMessage, WorkOrder
from console.services.delivery import outbox
from console.services.engine.execute import execute
from tests.factories import Runs
from tests.helpers import make_config

LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}
BROKEN = {"fail_times": 9, "error": "fatal", "code": "bad_account", "message": "account 42 is closed"}


@pytest.fixture
def runs(app):
    return Runs()


def die(runs, clock) -> DeadLetter:
    run_id = runs.submit("demo.flaky", BROKEN, policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    return runs.dead_letters(run_id)[0]


def test_a_group_shares_one_work_order_with_an_exact_count_and_one_pending_alert(runs, clock):
    letters = [die(runs, clock) for _ in range(3)]
    db.session.expire_all()
    (order,) = db.session.execute(select(WorkOrder)).scalars().all()
    assert {letter.work_order_id for letter in letters} == {order.id}
    assert order.dead_letter_count == 3
    (alert,) = [m for m in db.session.execute(select(OutboxMessage)).scalars() if m.kind == "alert"]
    assert alert.occurrences == 3 and alert.payload["dead_letter_id"] == letters[-1].id  # the newest payload
    assert len([m for m in runs.outbox("workorder")]) == 1


def test_a_storm_spends_no_numbers_of_the_next_work_order_or_message(runs, clock):
    """On PostgreSQL each insert that found the group's order or pending alert there spent a sequence number: after
    WO #36 came #636 (helper 143). The next group's order and alert take the next numbers."""
    storm = [die(runs, clock) for _ in range(5)]
    run_id = runs.submit("demo.flaky", {**BROKEN, "code": "other", "message": "disk full"}, policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    (other,) = runs.dead_letters(run_id)
    assert other.work_order_id == storm[0].work_order_id + 1
    alerts = sorted(m.id for m in runs.outbox("alert"))
    assert alerts[1] - alerts[0] <= 2  # the first order's request may sit between them, not the storm's letters


def test_a_long_code_and_message_fit_their_columns_on_postgresql_too(runs, clock):
    """An 80+ character code, or a title past 255, made PostgreSQL refuse the attempt's whole bookkeeping (SQLite
    does not check lengths)."""
    run_id = runs.submit("demo.flaky", {**BROKEN, "code": "c" * 300, "message": "m" * 300}, policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    (letter,) = runs.dead_letters(run_id)
    assert letter.error_code == "c" * 80 and runs.get(run_id).error_code == "c" * 80
    title = db.session.get(WorkOrder, letter.work_order_id).title
    assert len(title) == 255 and title.startswith("python:demo.flaky: " + "c" * 80) and title.endswith("…")


def test_the_database_refuses_a_second_active_work_order_for_a_group(runs, clock):
    letter = die(runs, clock)
    order = db.session.get(WorkOrder, letter.work_order_id)
    db.session.add(WorkOrder(tenant_id=order.tenant_id, fingerprint=order.fingerprint, title="twin", status="open"))
    with pytest.raises(IntegrityError):
        db.session.commit()
    db.session.rollback()
    # A closed one is history, not a twin: the group's next dead letter opens a new order beside it.
    db.session.execute(text("UPDATE work_orders SET status = 'closed' WHERE id = :id"), {"id": order.id})
    db.session.commit()
    again = die(runs, clock)
    assert again.work_order_id != order.id
    assert db.session.get(WorkOrder, again.work_order_id).dead_letter_count == 1


def test_outbox_add_merges_into_the_pending_message_only(app, clock):
    first = outbox.add("alert", "k", {"n": 1}, clock())
    db.session.commit()
    assert first is not None and first.occurrences == 1
    assert outbox.add("alert", "k", {"n": 2}, clock()) is None
    db.session.commit()
    db.session.refresh(first)
    assert (first.occurrences, first.payload) == (2, {"n": 2})
    db.session.execute(text("UPDATE outbox SET status = 'delivered' WHERE id = :id"), {"id": first.id})
    db.session.commit()
    second = outbox.add("alert", "k", {"n": 3}, clock())
    db.session.commit()
    assert second is not None and second.id != first.id  # the delivered one is history


def test_the_migration_merges_duplicates_made_before_the_indexes(tmp_path, redis_url, blank_database):
    app = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=blank_database))
    with app.app_context():
        upgrade(revision="b7d41c2e9a10")
        engine = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])
        with engine.begin() as connection:
            for order_id in (1, 2):
                connection.execute(text(
                    "INSERT INTO work_orders (id, tenant_id, fingerprint, title, status, dead_letter_count, created_at)"
                    " VALUES (:id, 1, 'fp', 't', 'open', 5, '2026-12-01 00:00:00')"), {"id": order_id})
            connection.execute(text("INSERT INTO runs (id, tenant_id, handler, params, policy_overrides, "
                                    "idempotency_key, status, attempt, series, executions, progress, "
                                    "cancel_requested, source, created_at, updated_at) VALUES (1, 1, 'python:x', "
                                    "'{}', '{}', 'k', 'dead', 1, 1, 1, 0, false, 'api', '2026-12-01', '2026-12-01')"))
            for letter_id, order_id in ((1, 1), (2, 2), (3, 2)):
                connection.execute(text(
                    "INSERT INTO dead_letters (id, run_id, tenant_id, handler, series, attempts, reason, fingerprint,"
                    " status, work_order_id, created_at) VALUES (:id, 1, 1, 'python:x', 1, 1, 'exhausted', 'fp',"
                    " 'open', :order, '2026-12-01 00:00:00')"), {"id": letter_id, "order": order_id})
            for message_id in (1, 2):
                connection.execute(text(
                    "INSERT INTO outbox (id, kind, channel, dedup_key, payload, occurrences, status, attempts,"
                    " next_attempt_at, created_at) VALUES (:id, 'alert', 'default', 'dead:1:fp', '{}', 1, 'pending',"
                    " 0, '2026-12-01', '2026-12-01')"), {"id": message_id})
        upgrade()
        with engine.connect() as connection:
            orders = connection.execute(text("SELECT id, status, dead_letter_count FROM work_orders ORDER BY id")).all()
            letters = connection.execute(text("SELECT work_order_id FROM dead_letters ORDER BY id")).scalars().all()
            messages = connection.execute(text("SELECT id, status FROM outbox ORDER BY id")).all()
        engine.dispose()
    assert [(o.id, o.status, o.dead_letter_count) for o in orders] == [(1, "open", 3), (2, "closed", 5)]
    assert letters == [1, 1, 1]
    assert [(m.id, m.status) for m in messages] == [(1, "skipped"), (2, "pending")]
