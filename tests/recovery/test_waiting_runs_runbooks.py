"""Retry or cancel waiting runs by filter (Sidekiq's Retry all / Delete all): the console offered one run at a time,
and an operator with 250 runs in an hour's backoff had 250 pages to press (helper 153)."""

import re

import pytest
from rq import Queue
from sqlalchemy import select, update

from console.extensions import db
from console.models import AuditEntry, Run
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.engine import queueing
from console.services.engine.execute import execute
from console.services.errors import InvalidInput
from console.services.people import tenants
from console.services.recovery import runbooks
from console.services.scheduling import tasks
from tests.factories import LENIENT, Runs, changes_of, make_tenant, run_now

SLOW_RETRY = {**LENIENT, "max_attempts": 5, "base_delay_s": 3600, "max_delay_s": 3600, "jitter": 0}


def waiting(runs: Runs, clock, code: str = "carrier_down", tenant: str = "default") -> int:
    """A run whose first attempt failed retryably: it waits an hour for its next one."""
    run_id = runs.submit("demo.flaky", {"fail_times": 9, "code": code}, policy=SLOW_RETRY, tenant=tenant)
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    return run_id


def statuses(*run_ids: int) -> list[str]:
    db.session.expire_all()
    return [db.session.get(Run, run_id).status for run_id in run_ids]


def test_retry_waiting_runs_starts_them_now_after_a_dry_run_that_changes_nothing(app, staff, clock):
    runs = Runs()
    first, second = waiting(runs, clock), waiting(runs, clock)
    other = waiting(runs, clock, code="bad_address")
    dry = run_now("retry_waiting_runs", {"code": "carrier_down"}, staff["olga"], clock=clock, dry_run=True)
    assert changes_of(dry, planned=True) == [("run", str(first), "status", "retry_wait", "pending"),
                                            ("run", str(second), "status", "retry_wait", "pending")]
    assert statuses(first, second, other) == ["retry_wait"] * 3
    real = run_now("retry_waiting_runs", {"code": "carrier_down"}, staff["olga"], clock=clock)
    assert real.status == "succeeded" and "2 of the 2 looked at started now." in real.log
    assert statuses(first, second, other) == ["pending", "pending", "retry_wait"]
    assert changes_of(real, planned=False) == changes_of(dry, planned=True)
    queued = Queue(queueing.RUN_QUEUE, connection=get_redis()).job_ids
    assert {queueing.job_id(first, 1, 1), queueing.job_id(second, 1, 1)} <= set(queued)
    audited = db.session.execute(select(AuditEntry.target_id, AuditEntry.actor).where(
        AuditEntry.action == "run.retry")).all()
    assert sorted(audited) == sorted([(str(first), "olga"), (str(second), "olga")])
    assert execute(first, 1, clock=clock) == "retry_wait"  # its next attempt ran now, not an hour later


def test_cancel_waiting_runs_cancels_only_waiting_runs_of_the_tenant_asked_for(app, auth, staff, clock):
    make_tenant("acme")
    runs = Runs()
    ours, pending = waiting(runs, clock, tenant="acme"), runs.submit("demo.noop", tenant="acme")
    theirs = waiting(runs, clock)  # the default tenant's
    started = waiting(runs, clock, tenant="acme")
    db.session.execute(update(Run).where(Run.id == started).values(status="running"))
    db.session.commit()
    scoped = auth.make_user("anna", "operator", tenant=tenants.find("acme"))
    done = run_now("cancel_waiting_runs", {"status": "both"}, Actor("anna", scoped.id), clock=clock,
                   scope=tenants.find("acme").id)
    assert done.status == "succeeded", done.log
    assert statuses(ours, pending, theirs, started) == ["cancelled", "cancelled", "retry_wait", "running"]
    assert sorted(row[1] for row in changes_of(done, planned=False)) == sorted([str(ours), str(pending)])


def test_a_run_that_moved_on_before_its_turn_is_left_alone_and_said(app, staff, clock, monkeypatch):
    from jobs.runbooks import waiting_runs

    runs = Runs()
    moved, kept = waiting(runs, clock), waiting(runs, clock)
    picked = waiting_runs._waiting

    def picked_then_moved(ctx, statuses, after_id, size):  # read as waiting, then a worker takes the first
        found = picked(ctx, statuses, after_id, size)
        db.session.execute(update(Run).where(Run.id == moved).values(status="running")
                           .execution_options(synchronize_session=False))  # as another process: unseen here
        db.session.commit()
        return found

    monkeypatch.setattr(waiting_runs, "_waiting", picked_then_moved)
    done = run_now("cancel_waiting_runs", {"limit": 2}, staff["olga"], clock=clock)
    assert done.status == "succeeded" and f"Run #{moved} left alone: it is running now." in done.log
    assert statuses(moved, kept) == ["running", "cancelled"]
    assert changes_of(done, planned=False) == [("run", str(kept), "status", "retry_wait", "cancelled")]


def test_a_bare_handler_name_is_a_python_handlers_as_everywhere_else(app, staff, clock):
    """"demo.flaky" matched nothing ("No run matches") where the Runs page and the DLQ take it (helper 157)."""
    first = waiting(Runs(), clock)
    dry = run_now("cancel_waiting_runs", {"handler": "demo.flaky"}, staff["olga"], clock=clock, dry_run=True)
    assert changes_of(dry, planned=True) == [("run", str(first), "status", "retry_wait", "cancelled")]


def test_their_real_runs_go_ahead_of_the_waiting_runs_they_act_on(app, staff, clock):
    """On the maintenance queue, read last, a cancel of a backlog ran once the backlog had (helper 157)."""
    runs = Runs()
    backlog = [runs.submit("demo.noop") for _ in range(3)]
    execution = runbooks.start("cancel_waiting_runs", {"status": "pending"}, staff["olga"], scope=None, clock=clock)
    queued = Queue(queueing.RUN_QUEUE, connection=get_redis()).job_ids
    assert queued[0] == f"runbook-{execution.id}" and len(queued) == len(backlog) + 1
    replay = runbooks.start("replay_dead_letters", {"every": True}, staff["olga"], scope=None, clock=clock)
    assert f"runbook-{replay.id}" not in Queue(queueing.RUN_QUEUE, connection=get_redis()).job_ids  # as before


def test_a_task_and_a_handler_together_are_refused(app, staff, clock):
    task = tasks.register(tenants.find("default"), {"name": "nightly", "handler": "demo.flaky", "cron": "0 2 * * *"},
                          staff["olga"])
    with pytest.raises(InvalidInput) as refused:
        runbooks.start("retry_waiting_runs", {"handler": "python:demo.flaky", "task": task.id}, staff["olga"],
                       scope=None, clock=clock, enqueue=False)
    assert refused.value.to_dict()["errors"]["handler"] == "give a task or a handler, not both"


def test_the_runs_list_of_waiting_runs_links_to_the_runbooks_filled_in(app, client, auth, clock):
    runs = Runs()
    waiting(runs, clock)
    auth.as_role("operator")
    page = client.get("/runs?status=retry_wait&code=carrier_down").get_data(as_text=True)
    assert 'href="/runbooks/retry_waiting_runs?code=carrier_down"' in page and "Retry all now…</a>" in page
    assert 'href="/runbooks/cancel_waiting_runs?status=retry_wait&amp;code=carrier_down"' in page
    form = client.get("/runbooks/retry_waiting_runs?code=carrier_down").get_data(as_text=True)
    assert 'value="carrier_down"' in form
    both = client.get("/runs?status=pending&status=retry_wait").get_data(as_text=True)
    assert "Retry all now…" not in both and "/runbooks/cancel_waiting_runs?status=both" in both
    # A list these runbooks cannot say (a text search) offers neither; nor does a viewer's.
    assert "Cancel all…" not in client.get("/runs?status=retry_wait&q=carrier").get_data(as_text=True)
    assert "Cancel all…" not in client.get("/runs?status=dead").get_data(as_text=True)
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("viewer")
    assert "Cancel all…" not in client.get("/runs?status=retry_wait").get_data(as_text=True)


def test_cancelling_a_workflows_waiting_step_says_the_workflow_then_undoes_the_steps_before(app, staff, clock, saga):
    # The step's cancel stopped its workflow and undid step 1; the dry-run and the log said nothing of it (helper 160).
    workflow_id = saga.submit([{"handler": "demo.flaky_compensated", "params": {"fail_times": 0}},
                               {"handler": "demo.flaky", "params": {"fail_times": 9, "code": "carrier_down"}}])
    assert saga.execute(workflow_id, 1) == "succeeded"
    saga.advance(workflow_id)
    assert saga.execute(workflow_id, 2) == "retry_wait"
    step = saga.run(workflow_id, 2)
    said = (f"Run #{step.id} is step 2 of workflow #{workflow_id} (running). Once it ends cancelled the workflow "
            "stops and undoes step 1.")
    dry = run_now("cancel_waiting_runs", {"handler": "demo.flaky"}, staff["olga"], clock=clock, dry_run=True)
    assert said in dry.log
    real = run_now("cancel_waiting_runs", {"handler": "demo.flaky"}, staff["olga"], clock=clock)
    assert said in real.log and statuses(step.id) == ["cancelled"]


def test_the_runs_list_of_a_handlers_waiting_runs_links_to_runbooks_that_leave_its_task_runs_alone(
        app, client, auth, staff, clock):
    runs = Runs()
    bare = waiting(runs, clock)  # demo.flaky submitted without a task, as the list's handler filter shows
    task = tasks.register(tenants.find("default"), {"name": "nightly", "handler": "demo.flaky"}, staff["olga"])
    of_task = runs.submit(None, {"fail_times": 9, "code": "carrier_down"}, task=task, policy=SLOW_RETRY)
    assert execute(of_task, 0, clock=clock) == "retry_wait"
    auth.as_role("operator")
    page = client.get("/runs?status=retry_wait&handler=python:demo.flaky").get_data(as_text=True)
    link = "/runbooks/retry_waiting_runs?handler=python:demo.flaky&amp;without_task=1"
    assert f'href="{link}"' in page
    assert 'href="/runbooks/cancel_waiting_runs?status=retry_wait&amp;handler=python:demo.flaky&amp;without_task=1"' \
        in page
    form = client.get(link.replace("&amp;", "&")).get_data(as_text=True)
    assert 'value="python:demo.flaky"' in form and re.search(r'<input checked id="without_task"', form)
    done = run_now("retry_waiting_runs", {"handler": "python:demo.flaky", "without_task": True}, staff["olga"],
                   clock=clock)
    assert "1 of the 1 looked at started now." in done.log
    assert statuses(bare, of_task) == ["pending", "retry_wait"]  # as the list showed: the task's run is left
    with pytest.raises(InvalidInput) as refused:
        runbooks.start("cancel_waiting_runs", {"task": task.id, "without_task": True}, staff["olga"], scope=None,
                       clock=clock, enqueue=False)
    assert "without_task" in refused.value.to_dict()["errors"]
