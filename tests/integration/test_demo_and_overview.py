"""Demo data and the Overview page: a fresh console has something to look at, refreshed live."""

from sqlalchemy import func

from console.domain.clock import utcnow
from console.extensions import db
from console.models import (
    Approval,
    AuditEntry,
    DeadLetter,
    Run,
    RunbookExecution,
    Task,
    Tenant,
    User,
    Workflow,
    WorkOrder,
)
from console.services.actor import SYSTEM, Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants, users
from console.services.recovery import decisions, undo_retry
from console.services.reports import figures
from console.services.reports import scope as report_scope
from console.services.system import demo, demo_roles


def test_seed_demo_outside_demo_mode_refuses_before_writing_anything(app, snapshot):
    """Its tasks name demo.sleep, known in demo mode only: it stopped half-way with a traceback (helper 143)."""
    app.config["DEMO"] = False
    before = snapshot()
    refused = app.test_cli_runner().invoke(args=["seed-demo"])
    assert refused.exit_code == 1 and "run it with REBOUND_DEMO=1" in refused.output and "nothing was added" in \
        refused.output
    assert snapshot() == before


def test_seed_demo_submits_runs_through_the_engine_and_refuses_to_run_twice(app):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["seed-demo"])
    assert result.exit_code == 0 and "runs submitted" in result.output
    assert {t.name for t in db.session.query(Tenant)} == {"default", "acme", "globex"}
    runs = db.session.query(Run).filter(Run.source == "demo").all()
    assert len(runs) == 38 and {r.status for r in runs} == {"pending"}
    # Runbooks opens on a dry-run waiting for a worker: it changes nothing.
    [dry_run] = db.session.query(RunbookExecution).all()
    assert (dry_run.runbook, dry_run.dry_run, dry_run.status) == ("replay_dead_letters", True, "queued")
    again = runner.invoke(args=["seed-demo"])
    assert again.exit_code == 1 and "--force" in again.output
    assert not demo.is_empty()
    # --force on the demo itself was a traceback (its tasks registered twice); with --runs it adds the history only.
    forced = runner.invoke(args=["seed-demo", "--force"])
    assert forced.exit_code == 1 and "the demo data is here already" in forced.output
    runs_before = db.session.query(Run).count()
    history = runner.invoke(args=["seed-demo", "--force", "--runs", "20"])
    assert history.exit_code == 0 and "adding the history only" in history.output, history.output
    assert db.session.query(Run).count() == runs_before + 20
    assert runner.invoke(args=["seed-demo", "--force", "--runs", "-5"]).exit_code == 2
    more = runner.invoke(args=["seed-demo", "--force", "--runs", "10", "--dead-letters", "50"])  # cut to 10 unsaid
    assert more.exit_code == 2 and "--dead-letters 50 is more than the --runs 10 they are among" in more.output
    # A Reports history on top of the first start's: its tasks' names were taken (a UNIQUE traceback; helper 129).
    reports = runner.invoke(args=["seed-demo", "--force", "--runs", "30", "--days", "2", "--tasks", "3"])
    assert reports.exit_code == 0, reports.output
    names = db.session.query(Task.name).filter(Task.name.startswith("report-history-")).order_by(Task.id).all()
    assert [name for (name,) in names][-3:] == ["report-history-006", "report-history-007", "report-history-008"]
    both = runner.invoke(args=["seed-demo", "--force", "--runs", "30", "--days", "2", "--dead-letters", "5"])
    assert both.exit_code == 2 and "--dead-letters goes without --days" in both.output


def test_the_demos_failures_leave_the_readmes_first_run_to_its_own_retries(app, clock):
    """The demo's dying demo.flaky runs counted on the handler's shared breaker, so the README's first example (the
    default policy: 5 failures open it) was held by an open breaker on its first failure (helper 126)."""
    demo.seed()
    dying = db.session.query(Run).filter(Run.source == "demo", Run.handler == "python:demo.flaky",
                                         Run.params["fail_times"].as_integer() == 9).order_by(Run.id).all()
    assert len(dying) >= 5
    for run in dying:  # each fails its first attempt: more failures in a row than the default policy allows
        assert execute(run.id, 0, clock=clock) in ("retry_wait", "dead")
    first, _ = submit(tenants.find("default"), Actor("newcomer"), handler="demo.flaky", params={"fail_times": 2},
                      idempotency_key="invoice-7", clock=clock)
    for attempt in (0, 1):  # it fails twice, then succeeds at its retries' times, as the README says
        assert execute(first.id, attempt, clock=clock) == "retry_wait"
        db.session.expire_all()
        clock.set(db.session.get(Run, first.id).next_retry_at)
    assert execute(first.id, 2, clock=clock) == "succeeded"


def test_overview_counts_live_runs_and_refreshes_one_region_over_htmx(client, auth, app, clock):
    demo.seed()
    # Two demo kinds fail fatally and one of them compensates; PostgreSQL returns rows in no promised order.
    dead = db.session.query(Run).filter(Run.params["code"].as_string() == "invalid_account").order_by(Run.id).first()
    execute(dead.id, 0, clock=clock)
    auth.as_role("viewer")
    page = client.get("/overview").get_data(as_text=True)
    assert 'hx-trigger="every 5s"' in page and 'data-counter="dead_open">1<' in page
    # 37 demo runs and the first steps of the three demo workflows.
    assert 'data-counter="pending">40<' in page and "account 1000 is closed" in page
    fragment = client.get("/overview", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="live"') and "<html" not in fragment


def test_the_demo_has_a_saga_that_goes_through_and_one_undone_in_reverse_order(app, saga):
    demo.seed()
    shipped, undone, _ = (db.session.query(Workflow).filter_by(name=f"ship order {order}").one().id
                          for order, _, _ in demo.DEMO_WORKFLOWS)
    for step in (1, 2, 3):  # as the workers would: each step, then the workflow's advance
        assert saga.execute(shipped, step) == "succeeded"
        saga.advance(shipped)
    assert saga.status(shipped) == "succeeded"

    for step in (1, 2):
        assert saga.execute(undone, step) == "succeeded"
        saga.advance(undone)
    assert saga.execute(undone, 3) == "dead"  # the carrier refuses the parcel: not worth a retry
    assert saga.advance(undone) == "undoing"
    # The engine asks for the card's charge to be undone first, then the stock's reservation.
    assert saga.events("compensating", workflow_id=undone) == [(2, "compensating")]
    assert saga.undo(undone, 2) == "compensated"
    assert saga.advance(undone) == "undoing"
    assert saga.events("compensating", workflow_id=undone) == [(2, "compensating"), (1, "compensating")]
    assert saga.undo(undone, 1) == "compensated"
    assert saga.advance(undone) == "compensated" == saga.status(undone)
    assert [(run.workflow_step, run.status) for run in saga.runs(undone)] == [
        (1, "compensated"), (2, "compensated"), (3, "dead")]
    assert saga.runs(undone)[2].error_code == "carrier_rejected"


def test_the_demos_third_saga_stops_for_a_person_until_its_refund_service_is_back(app, saga, monkeypatch):
    demo.seed()
    stopped = db.session.query(Workflow).filter_by(name="ship order 1003").one().id
    for step in (1, 2):
        assert saga.execute(stopped, step) == "succeeded"
        saga.advance(stopped)
    assert saga.execute(stopped, 3) == "dead"
    assert saga.advance(stopped) == "undoing"
    assert saga.undo(stopped, 2) == "dead"  # the card's refund: its service is down, three tries fail
    saga.advance(stopped)
    assert saga.status(stopped) == "compensation_failed"
    assert "the undo's service is down until" in saga.run(stopped, 2).error_message
    assert [step.compensation_status for step in saga.steps(stopped)] == ["not_attempted", "failed", None]

    # Once the service is back, the person retries the undo; the stock reservation is undone after it.
    later = utcnow() + demo.REFUNDS_DOWN
    monkeypatch.setattr("jobs.handlers.demo.utcnow", lambda: later)
    undo_retry.retry(saga.run(stopped, 2).id, Actor("admin"), clock=saga.clock)
    assert saga.undo(stopped, 2) == "compensated"
    assert saga.advance(stopped) == "undoing"
    assert saga.undo(stopped, 1) == "compensated"
    assert saga.advance(stopped) == "compensated"


def test_a_tenant_limited_viewer_sees_only_their_tenant(client, auth):
    demo.seed()
    globex = db.session.query(Tenant).filter_by(name="globex").one()
    auth.make_user("gina", "viewer", tenant=globex)
    auth.login("gina")
    page = client.get("/overview").get_data(as_text=True)
    waiting = db.session.query(Run).filter_by(tenant_id=globex.id, status="pending").count()
    assert f'data-counter="pending">{waiting}<' in page and waiting < 38


def test_an_empty_overview_says_where_dead_letters_come_from_in_page_and_fragment(client, auth):
    auth.as_role("viewer")
    for headers in ({}, {"HX-Request": "true"}):
        html = client.get("/overview", headers=headers).get_data(as_text=True)
        assert '<td colspan="7" class="empty"><strong>No open dead letters.</strong>' in html


def test_a_first_start_gives_a_manager_a_fortnight_of_reports_and_an_approver_a_fix_to_decide(app, clock):
    result = app.test_cli_runner().invoke(args=["seed-demo"])
    assert "Report history: 4000 runs over 14 days" in result.output and "waits for an approver" in result.output
    assert db.session.query(Run).filter(Run.source.in_(("cron", "history"))).count() == demo_roles.HISTORY_RUNS
    # Newest first by id, as the lists sort: the history in the order it happened, the live runs after it.
    history = db.session.query(Run.id, Run.created_at).filter(Run.source.in_(("cron", "history"))).order_by(
        Run.id).all()
    assert [created for _, created in history] == sorted(created for _, created in history)
    assert db.session.query(func.min(Run.id)).filter(Run.source == "demo").scalar() > history[-1].id
    # The tasks too: the live ones first on the Tasks list (newest id first), the history's as old as its runs.
    tasks = db.session.query(Task.name, Task.created_at).order_by(Task.id.desc()).all()
    assert [name for name, _ in tasks[:len(demo.DEMO_TASKS)]] == [spec["name"] for _, spec in demo.DEMO_TASKS][::-1]
    oldest_run = db.session.query(func.min(Run.scheduled_for)).filter(Run.source.in_(("cron", "history"))).scalar()
    assert all(created <= oldest_run for name, created in tasks if name.startswith("report-history-"))
    summary = figures.summary(report_scope.period("7d", None, None, utcnow()), report_scope.resolve(None, None, None),
                              utcnow())
    assert summary.as_of is not None and summary.values["on_time_rate"].value > 0.9  # rolled up already
    assert summary.values["dead_letters_created"].value > 0

    # The audit log reads forward in time: the history was written as it ended, not audited now with old dates.
    moments = [at for (at,) in db.session.query(AuditEntry.at).order_by(AuditEntry.seq)]
    assert moments and moments == sorted(moments)
    [fix] = db.session.query(Approval).filter(Approval.status == "pending").all()
    requester = db.session.get(User, fix.requested_by_id)
    assert requester.username == demo_roles.REQUESTER and not requester.active  # it asked; it cannot log in
    letter = db.session.get(DeadLetter, fix.payload["dead_letter_id"])
    assert letter.status == "open" and letter.run.handler == "python:demo.flaky"
    admin = users.find("admin") or users.create("admin", "admin", "admin-pass-123456", SYSTEM)[0]
    decisions.approve(fix.id, Actor(admin.username, admin.id))  # the first admin is a second person
    run = db.session.get(Run, letter.run_id)
    assert run.status == "pending" and run.params == {"fail_times": 0}
    assert execute(run.id, run.attempt) == "succeeded"


def test_the_report_history_s_work_orders_count_their_dead_letters(app):
    """The Work orders list reads "N open of M": M is how many letters the order gathered, never fewer than open."""
    app.test_cli_runner().invoke(args=["seed-demo"])
    counted = dict(db.session.query(DeadLetter.work_order_id, func.count()).group_by(DeadLetter.work_order_id).all())
    orders = db.session.query(WorkOrder.id, WorkOrder.dead_letter_count).all()
    assert orders and {order_id: count for order_id, count in orders} == {order_id: counted.get(order_id, 0)
                                                                         for order_id, _ in orders}
