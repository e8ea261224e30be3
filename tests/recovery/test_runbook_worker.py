"""Runbooks on real workers: the log streams while they run; a worker killed -9 mid-runbook leaves nothing running."""

from sqlalchemy import select

from console.extensions import db
from console.models import Approval, RunbookExecution
from console.services.recovery import decisions, runbook_reconcile, runbooks
from tests.helpers import wait_for


def stored(execution_id: int) -> RunbookExecution:
    db.session.commit()
    db.session.expire_all()
    return db.session.execute(select(RunbookExecution).where(RunbookExecution.id == execution_id)).scalar_one()


def test_a_worker_runs_a_queued_runbook_and_its_log_is_stored_while_it_runs(samples, staff, workers):
    workers(REBOUND_RUNBOOK_MODULES=samples)
    # Paced so a loaded machine still reads the log between step 2 and step 12 (5 s apart).
    execution = runbooks.start("sample_steps", {"steps": 12, "pause_s": 0.5}, staff["olga"], scope=None)
    assert execution.status == "queued"
    # Lines reach the database while it is still running (the page polls them), not only at the end.
    running = wait_for(lambda: (found := stored(execution.id)).status == "running" and "step 2 of 12" in found.log
                       and found, 20, 0.05, "the log to grow while the runbook runs")
    assert "step 12 of 12" not in running.log and running.worker_id
    done = wait_for(lambda: (found := stored(execution.id)).status == "succeeded" and found, 20, 0.1,
                    "the runbook to finish")
    assert done.changes_total == 12 and done.log.splitlines()[-1].endswith("Done: 12 changes made.")


def test_a_gated_runbook_is_previewed_by_a_worker_and_runs_once_approved(samples, staff, workers):
    workers(REBOUND_RUNBOOK_MODULES=samples)
    execution = runbooks.start("sample_gated", {"steps": 2}, staff["bea"], scope=None, reason="clean up")
    approval_id = execution.approval_id
    wait_for(lambda: stored(execution.id).previewed_at is not None, 20, 0.1, "the worker to preview it")
    db.session.expire_all()
    assert db.session.get(Approval, approval_id).after == {"step #1 done": True, "step #2 done": True}
    assert stored(execution.id).status == "awaiting_approval"
    decisions.approve(approval_id, staff["alex"], "fine")
    done = wait_for(lambda: (found := stored(execution.id)).status == "succeeded" and found, 20, 0.1,
                    "the approved runbook to run")
    assert done.changes_total == 2


def test_a_worker_killed_mid_runbook_leaves_no_execution_running(samples, staff, workers):
    doomed = workers(REBOUND_RUNBOOK_MODULES=samples)
    execution = runbooks.start("sample_steps", {"steps": 200, "pause_s": 0.1}, staff["olga"], scope=None)
    wait_for(lambda: "step 5 of 200" in stored(execution.id).log, 20, 0.05, "the runbook to be well under way")
    doomed.kill()  # SIGKILL: no cleanup, no goodbye
    doomed.wait()
    assert stored(execution.id).status == "running"

    def settled():
        runbook_reconcile.reconcile()  # the scheduler runs it every 15 s
        return stored(execution.id).status != "running"

    wait_for(settled, 20, 0.25, "the reconciler to notice the dead worker")
    lost = stored(execution.id)
    assert lost.status == "failed" and lost.error.startswith("worker lost:")
    committed = runbooks.changes(execution.id, planned=False)[1]
    assert committed >= 5 and lost.changes_total == committed  # every committed step is on record, none beyond
    assert lost.log.splitlines()[-1].endswith("Check them, then run it again.")
    # A new worker does not pick it up again: it is failed, for a person to look at.
    workers(REBOUND_RUNBOOK_MODULES=samples)
    runbooks.enqueue_run(execution.id)
    later = runbooks.start("sample_steps", {"steps": 1}, staff["olga"], scope=None)
    wait_for(lambda: stored(later.id).status == "succeeded", 20, 0.1, "the next runbook to run")
    assert stored(execution.id).status == "failed"
