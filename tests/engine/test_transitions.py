"""move_many: many runs change status in one guarded UPDATE, each with its timeline row, metric and log line."""

import logging

import pytest

from console import metrics
from console.domain.statuses import IllegalTransition
from console.extensions import db
from console.services.engine import transitions


def test_move_many_changes_only_the_runs_still_in_the_source_status(runs, clock, caplog):
    waiting = [runs.submit(idempotency_key=f"k{n}") for n in range(3)]
    moved_on = waiting.pop()
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": moved_on})
    with caplog.at_level(logging.INFO, logger="rebound.runs"):
        rows = transitions.move_many("pending", "cancelled", [*waiting, moved_on], clock(), reason="replaced",
                                     actor="ops", message="superseded", finished_at=clock())
        db.session.commit()
    assert sorted(row.id for row in rows) == waiting
    assert {row.status for row in rows} == {"cancelled"}  # RETURNING gives the rows as stored now
    for run_id in waiting:
        run = runs.get(run_id)
        assert (run.status, run.status_reason, run.finished_at) == ("cancelled", "replaced", clock())
        last = runs.events(run_id)[-1]
        assert (last.kind, last.from_status, last.to_status, last.actor, last.message) == (
            "cancelled", "pending", "cancelled", "ops", "superseded")
    assert runs.get(moved_on).status == "running"
    assert [e.kind for e in runs.events(moved_on)] == ["submitted"]
    assert sorted(r.run_id for r in caplog.records if "→ cancelled" in r.getMessage()) == waiting


def test_move_many_evaluates_sql_values_and_a_guard(runs, clock):
    first, second = runs.submit(idempotency_key="a"), runs.submit(idempotency_key="b")
    db.session.execute(db.text("UPDATE runs SET status = 'dead', error_code = 'boom' WHERE id IN (:a, :b)"),
                       {"a": first, "b": second})
    rows = transitions.move_many("dead", "pending", [first, second], clock(), reason="replay", clear_error=True,
                                 series=transitions.RUNS.c.series + 1, attempt=0,
                                 guard=transitions.RUNS.c.id == first)
    db.session.commit()
    assert [(row.id, row.series, row.error_code) for row in rows] == [(first, 2, None)]
    assert (runs.get(second).status, runs.get(second).series) == ("dead", 1)


def test_move_many_counts_what_each_change_means(runs, clock, monkeypatch):
    counted = []
    monkeypatch.setattr(metrics, "transition", lambda run, source, target, *rest: counted.append((run.id, target)))
    run_ids = [runs.submit(idempotency_key=f"m{n}") for n in range(2)]
    transitions.move_many("pending", "cancelled", run_ids, clock(), reason="cancelled_by_person")
    assert counted == [(run_id, "cancelled") for run_id in run_ids]


def test_move_many_refuses_an_illegal_transition_before_writing(runs, clock):
    run_id = runs.submit()
    with pytest.raises(IllegalTransition):
        transitions.move_many("pending", "succeeded", [run_id], clock(), reason="nope")
    assert runs.get(run_id).status == "pending"


def test_request_cancel_asks_only_a_running_run(runs, clock):
    run_id = runs.submit()
    run = runs.get(run_id)
    assert transitions.request_cancel(run, clock(), actor="ops") is False
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": run_id})
    db.session.commit()
    run = runs.get(run_id)
    assert transitions.request_cancel(run, clock(), actor="ops") is True
    db.session.commit()
    assert runs.get(run_id).cancel_requested is True
    assert runs.events(run_id)[-1].kind == "cancel_requested"


def test_a_change_is_logged_once_its_transaction_commits_and_never_if_it_rolls_back(runs, clock, caplog):
    """Through a database outage the log said "running → dead" 43 s before the write that said so committed."""
    first, second = runs.submit(idempotency_key="c1"), runs.submit(idempotency_key="c2")
    with caplog.at_level(logging.INFO, logger="rebound.runs"):
        transitions.move(runs.get(first), "cancelled", clock(), reason="cancelled_by_person")
        transitions.move_many("pending", "cancelled", [second], clock(), reason="cancelled_by_person")
        assert not [r for r in caplog.records if "→ cancelled" in r.getMessage()]  # not yet written
        db.session.rollback()
        assert runs.get(first).status == runs.get(second).status == "pending"
        transitions.move(runs.get(first), "cancelled", clock(), reason="cancelled_by_person")
        db.session.commit()
    assert [r.getMessage() for r in caplog.records if "→ cancelled" in r.getMessage()] == [
        f"run {first}: pending → cancelled (cancelled_by_person)"]
