"""Submitting a run: the statements it costs, and what the caller gets back."""

from sqlalchemy import event, func, select

from console.extensions import db
from console.models import Run
from console.services import tenants
from console.services.actor import Actor
from console.services.engine import submit as submitting
from console.services.engine.submit import submit


def test_a_submit_writes_the_run_and_reads_nothing_back(app):
    tenant = tenants.find("default")
    submit(tenant, Actor("test"), handler="demo.noop")  # the first one also reads the policy's spec
    db.session.refresh(tenant)  # as a request finds its tenant loaded
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
    # The policy version in force, the limits' counts, the run, its timeline row; queueing the run and
    # answering the request read nothing back.
    assert statements == ["SELECT retry_policies.id, retry_policies.current_version", "SELECT (SELECT count(*)",
                          "INSERT INTO runs", "INSERT INTO run_events"]
    db.session.expire_all()
    stored = db.session.execute(select(Run).where(Run.id == answer["id"])).scalar_one()
    assert created and answer == {key: getattr(stored, key) for key in answer}
    assert answer["status"] == "pending" and answer["params"] == {"n": 1}


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
