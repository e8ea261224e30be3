"""Submitting a run: the statements it costs, and what the caller gets back."""

import pytest
from sqlalchemy import event, func, select, update

from console.extensions import db
from console.models import OutboxMessage, Run, RunEvent, Tenant
from console.services.actor import Actor
from console.services.engine import submit as submitting
from console.services.engine.submit import submit
from console.services.errors import QueueFull
from console.services.people import tenants


def test_a_submit_writes_the_run_and_reads_nothing_back(app):
    tenant = tenants.find("default")
    submit(tenant, Actor("test"), handler="demo.noop")  # the first one also reads the policy's spec
    assert "max_queued" not in tenant.__dict__  # that commit expired the tenant, as it does between a caller's submits
    statements = []

    def record(connection, cursor, statement, *args):
        statements.append(" ".join(statement.split()[:3]))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        run, created = submit(tenant, Actor("test"), handler="demo.noop", params={"n": 1})
        answer = {key: getattr(run, key) for key in ("id", "status", "attempt", "series", "idempotency_key",
                                                     "params", "created_at", "handler")}
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    # The limits' counts with the tenant's quota and the policy version in force (one read), the run, its timeline
    # row; the tenant is not read again, and queueing the run and answering the request read nothing back. On
    # PostgreSQL the run and its timeline row are one statement.
    if db.engine.dialect.name == "postgresql":
        assert statements == ["SELECT (SELECT count(*)", 'WITH "new" AS']
    else:
        assert statements == ["SELECT (SELECT count(*)", "INSERT INTO runs", "INSERT INTO run_events"]
    assert run in db.session and not db.session.dirty  # persistent, with nothing left for a later flush to write
    db.session.expire_all()
    stored = db.session.execute(select(Run).where(Run.id == answer["id"])).scalar_one()
    assert created and answer == {key: getattr(stored, key) for key in answer}
    assert answer["status"] == "pending" and answer["params"] == {"n": 1}
    (submitted,) = db.session.execute(select(RunEvent).where(RunEvent.run_id == run.id)).scalars()
    assert (submitted.kind, submitted.to_status, submitted.attempt, submitted.series, submitted.executions,
            submitted.actor, submitted.data) == ("submitted", "pending", 0, 1, 0, "test",
                                                 {"source": "api", "policy_version": stored.policy_version})


def test_a_request_that_loses_the_race_for_its_key_answers_with_the_winners_run(app, monkeypatch):
    tenant = tenants.find("default")
    winner, _ = submit(tenant, Actor("test"), handler="demo.noop", idempotency_key="order-7")
    looked = []
    real = submitting.find_by_key

    def before_the_winner_committed(*args):
        # The loser looked its key up too early to see the winner, so its INSERT is the first to meet the clash.
        looked.append(args)
        return None if len(looked) == 1 else real(*args)

    monkeypatch.setattr(submitting, "find_by_key", before_the_winner_committed)
    run, created = submit(tenant, Actor("test"), handler="demo.noop", idempotency_key="order-7")
    assert (run.id, created) == (winner.id, False)
    assert db.session.execute(select(func.count()).select_from(Run).where(
        Run.idempotency_key == "order-7")).scalar() == 1


def test_the_tenant_quota_is_read_when_submitting_and_a_full_tenant_gets_nothing_new(app):
    tenant = tenants.find("default")
    for _ in range(2):
        submit(tenant, Actor("test"), handler="demo.noop")
    # Lowered behind the held object's back, as an admin's edit in another process would.
    db.session.execute(update(Tenant).where(Tenant.id == tenant.id).values(max_queued=2))
    db.session.commit()
    with pytest.raises(QueueFull) as refused:
        submit(tenant, Actor("test"), handler="demo.sleep")
    assert (refused.value.limit, refused.value.current, refused.value.maximum) == ("tenant.max_queued", 2, 2)
    assert "max_queued 2" in refused.value.detail
    assert db.session.execute(select(func.count()).select_from(Run)).scalar() == 2
    alert = db.session.execute(select(OutboxMessage).where(OutboxMessage.kind == "alert")).scalar_one()
    assert (alert.payload["limit"], alert.payload["current"], alert.payload["max"]) == ("tenant.max_queued", 2, 2)
