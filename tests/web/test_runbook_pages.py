"""The Runbooks pages: the list, a form built from the declaration (errors at the field), Dry-run and Run, an
execution's page with its changes, log and approval, and Admin → Runbooks."""

import re
from datetime import timedelta

import pytest
from rq import Queue
from sqlalchemy import select, update

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Approval, AuditEntry, DeadLetter, Run, RunbookExecution
from console.services.actor import Actor
from console.services.engine import control
from console.services.engine.queueing import MAINTENANCE_QUEUE
from console.services.recovery import decisions, runbook_runner, runbooks
from tests.factories import bearer, make_tenant
from tests.recovery.sample_runbooks import DECLARED_PASSWORD

HX = {"HX-Request": "true"}


def _actor(user) -> Actor:
    return Actor(user.username, user.id)


def post(client, auth, path: str, data: dict):
    return client.post(path, data={"csrf_token": auth.csrf("/runbooks"), **data})


def executions() -> list[RunbookExecution]:
    db.session.expire_all()
    return db.session.execute(select(RunbookExecution).order_by(RunbookExecution.id)).scalars().all()


def field_error(html: str, field: str) -> str:
    match = re.search(rf'<div class="field-error"[^>]*id="{field}-error">([^<]*)</div>', html)
    assert match, f"no error at the {field} field"
    return match.group(1)


def test_the_list_shows_each_runbook_with_its_risk_and_whether_it_needs_approval(client, auth):
    auth.as_role("viewer")
    html = client.get("/runbooks").get_data(as_text=True)
    assert '<a href="/runbooks" class="active" aria-current="page">Runbooks</a>' in html
    for title in ("Replay dead letters by filter", "Mark dead runs resolved", "Backfill a task",
                  "Purge old finished runs", "Reconcile the engine", "Fix a run&#39;s params and replay it"):
        assert title in html
    rows = {name: row for row in re.findall(r"<tr>.*?</tr>", html, re.S)
            for name in re.findall(r'class="mono subtle">(\w+)</span>', row)}
    assert "high risk" in rows["resolve_runs"] and "needs approval" in rows["resolve_runs"]
    assert "medium risk" in rows["backfill_task"] and "runs when asked" in rows["backfill_task"]
    assert "low risk" in rows["engine_reconcile"] and "whole system" in rows["engine_reconcile"]
    assert "never run" in rows["backfill_task"]


def test_the_form_is_built_from_the_declaration(client, auth):
    auth.as_role("operator")
    html = client.get("/runbooks/backfill_task").get_data(as_text=True)
    assert re.search(r'<input[^>]*id="task"[^>]*type="number"', html)
    # A text box typed as every time in the console (2026-12-01 14:05), not the browser's locale picker.
    assert re.search(r'<input[^>]*id="start"[^>]*placeholder="YYYY-MM-DD HH:MM"[^>]*type="text"', html)
    assert "First firing to consider, UTC." in html
    replay = client.get("/runbooks/replay_dead_letters").get_data(as_text=True)
    assert re.search(r'<select[^>]*id="age"', replay) and '<option selected value="any">' in replay
    assert 'value="50"' in replay  # the declared default rate, as a person would write it
    assert re.search(r'<select[^>]*id="tenant"', replay)  # an unscoped person picks the tenant
    fix = client.get("/runbooks/fix_params_and_replay").get_data(as_text=True)
    assert re.search(r'<input checked[^>]*id="merge"[^>]*type="checkbox"', fix)
    assert "Request approval to run" in fix and "Dry-run" in fix


def test_a_link_fills_the_form_in_and_a_bad_value_costs_nothing(client, auth):
    auth.as_role("operator")
    html = client.get("/runbooks/resolve_runs?runs=35&tenant=default&note=paid+by+hand").get_data(as_text=True)
    assert re.search(r'<input[^>]*id="runs"[^>]*value="35"', html)
    assert re.search(r'<option selected value="default">', html) and "paid by hand" in html
    backfill = client.get("/runbooks/backfill_task?task=7&start=2026-03-01T09:00&dry=x").get_data(as_text=True)
    assert re.search(r'<input[^>]*id="task"[^>]*value="7"', backfill)
    assert re.search(r'<input[^>]*id="start"[^>]*value="2026-03-01 09:00"', backfill)
    for hostile in ("task=99999999999999999999999999", "task=seven", "start=yesterday", "start=2026-13-45T99:00",
                    "task=%ED%A0%80", "note=" + "x" * 100_000):
        assert client.get(f"/runbooks/backfill_task?{hostile}").status_code == 200, hostile
    assert executions() == []  # a link only fills the form in


def test_a_dry_run_is_queued_for_a_worker_and_the_page_goes_to_it(app, client, auth, redis_url):
    auth.as_role("operator", "olga")
    response = post(client, auth, "/runbooks/replay_dead_letters", {"action": "dry_run", "code": "carrier_down",
                                                                     "rate": "5", "age": "any"})
    [execution] = executions()
    assert response.status_code == 303
    assert response.headers["Location"] == f"/runbooks/executions/{execution.id}?started=1"
    assert (execution.dry_run, execution.status, execution.requested_by) == (True, "queued", "olga")
    assert execution.params["code"] == "carrier_down" and execution.params["rate"] == 5.0
    assert Queue(MAINTENANCE_QUEUE, connection=app.extensions["rebound_redis"]).get_job_ids() == [
        f"runbook-{execution.id}"]
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert f"Started execution #{execution.id} of replay_dead_letters (a dry-run)" in page
    assert 'hx-trigger="every 1s"' in page
    # Said on its own page, not in the session: another tab of the person's loading a page meanwhile showed it there,
    # and two tabs pressing Run each showed the other's (helper 154).
    assert "Started execution" not in client.get("/runbooks").get_data(as_text=True)
    assert "Started execution" not in client.get(f"/runbooks/executions/{execution.id}").get_data(as_text=True)
    # Once it has run, a reload of the address it was started at no longer says a worker runs it (helper 164).
    runbook_runner.execute(execution.id)
    assert "Started execution" not in client.get(response.headers["Location"]).get_data(as_text=True)


def test_bad_params_are_shown_at_their_field_and_nothing_starts(client, auth):
    auth.as_role("operator")
    response = post(client, auth, "/runbooks/backfill_task", {"action": "dry_run", "task": "12x",
                                                               "start": "2026-01-05T05:00", "end": ""})
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    assert field_error(html, "task") == "is a task id: a whole number"
    assert field_error(html, "end") == "required"  # every wrong field at once, not one round after another
    assert "Nothing was started: fix the field marked below." in html
    response = post(client, auth, "/runbooks/backfill_task", {"action": "dry_run", "task": "999",
                                                               "start": "2026-01-05T05:00", "end": ""})
    html = response.get_data(as_text=True)
    assert response.status_code == 422
    assert field_error(html, "task") == "no task #999" and field_error(html, "end") == "required"
    assert 'value="2026-01-05 05:00"' in html  # what was typed stays, written as the page writes times
    for huge in ("2147483648", "99999999999999999999"):  # past the id columns' range: no row, not a 500
        response = post(client, auth, "/runbooks/backfill_task", {"action": "dry_run", "task": huge,
                                                                   "start": "2026-01-05T05:00", "end": ""})
        assert response.status_code == 422
        assert field_error(response.get_data(as_text=True), "task") == "an id (a whole number from 1 to 2,147,483,647)"
    early = post(client, auth, "/runbooks/backfill_task", {"action": "dry_run", "task": "999",
                                                            "start": "0001-01-01T00:00", "end": "2026-01-05T06:00"})
    assert early.status_code == 422  # its job overflowed counting firings from year 1
    assert field_error(early.get_data(as_text=True), "start") == "is a UTC time between 1970 and 9998"
    replay = post(client, auth, "/runbooks/replay_dead_letters", {"action": "dry_run", "rate": "0.5",
                                                                   "limit": "ten", "age": "any"})
    html = replay.get_data(as_text=True)
    assert field_error(html, "limit") == "a whole number" and "at least 1" in field_error(html, "rate")
    assert 'value="0.5"' in html
    # Checked as the API and `--param` check them: the box said "is a whole number" of 5.0, which they take, and a
    # choice no one offered was "Not a valid choice." (helper 125).
    odd = post(client, auth, "/runbooks/replay_dead_letters", {"action": "dry_run", "limit": "-5.0", "age": "1y"})
    html = odd.get_data(as_text=True)
    assert field_error(html, "limit") == "at least 1" and field_error(html, "age").startswith("one of any, ")
    assert executions() == []


def test_a_runbook_that_needs_approval_asks_for_a_reason_then_files_a_request(client, auth, dead_run):  # noqa: F811
    run_id, _ = dead_run()
    auth.as_role("operator")
    missing = post(client, auth, "/runbooks/resolve_runs", {"action": "run", "runs": str(run_id), "note": "paid"})
    assert missing.status_code == 422
    assert field_error(missing.get_data(as_text=True), "reason").startswith("give a reason")
    response = post(client, auth, "/runbooks/resolve_runs", {"action": "run", "runs": str(run_id), "note": "paid",
                                                             "reason": "refunded by finance"})
    [execution] = executions()
    assert response.status_code == 303 and execution.status == "awaiting_approval"
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert f'<a href="/approvals/{execution.approval_id}">Request #{execution.approval_id}</a>' in html
    # Its preview job may wait behind the worker's other queues: the pages do not say it runs before it does.
    assert "for the approver, its dry-run waits for a worker to take it" in html and "Asked for approval" in html
    assert "waits for a second person with the approve permission to decide; it expires" in html
    assert 'hx-trigger="every 1s"' in html  # a worker is about to write its preview
    request = client.get(f"/approvals/{execution.approval_id}").get_data(as_text=True)
    assert "So you can see what it would change, its dry-run waits for a worker to take it;" in request
    assert "The change" not in request
    execution.preview_started_at, execution.worker_id = utcnow(), "host:41:w1"  # as a worker's claim sets them
    db.session.commit()
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "for the approver, <code>host:41:w1</code> is dry-running it" in html
    request = client.get(f"/approvals/{execution.approval_id}").get_data(as_text=True)
    assert "So you can see what it would change, <code>host:41:w1</code> is dry-running it;" in request
    execution.preview_started_at = execution.worker_id = None
    db.session.commit()
    runbook_runner.preview(execution.id)
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert 'hx-trigger="every 5s"' in html  # now it waits for a person: the page still sees the decision land
    assert "Changes the approver is shown" in html  # waiting: nobody has decided yet
    # Each changed object is a link: the run, its dead letter (its row in the DLQ) and its work order.
    letter = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)).scalar_one()
    for href in (f"/runs/{run_id}", f"/dlq/{letter.id}", f"/workorders/{letter.work_order_id}"):
        assert f'<a href="{href}">#' in html, href
    opened = client.get(f"/dlq/{letter.id}")
    assert opened.status_code == 303 and opened.headers["Location"] == (
        f"/dlq/?view=list&group={letter.fingerprint}#dl-{letter.id}")
    assert "ran the approver's dry-run</span>" in html  # no worker has run it yet; the preview's is named
    # The approver judges it on the request's page: which runbook, how risky, with which params, what it changes.
    request = client.get(f"/approvals/{execution.approval_id}").get_data(as_text=True)
    assert (f'href="/runbooks/executions/{execution.id}">runbook resolve_runs on run #{run_id} · execution '
            f'#{execution.id}</a>') in request
    assert "high risk</span>" in request and "<th>note</th><td class=\"mono\">paid</td>" in request
    assert ("Changes its dry-run found <span class=\"subtle\">3: 1 dead letter, 1 run, 1 work order</span>"
            in request)  # by object: "8" read as 8 letters
    assert f'href="/runs/{run_id}">#{run_id}</a>' in request
    # What follows from the changes (a workflow's undo) is in the log only: the approver reads it here (helper 160).
    log = request.split("approval-dry-run-log")[1].split("</pre>")[0]
    assert "1 run(s) would be resolved, 1 dead letter(s) closed, 1 work order(s) closed." in log
    # Withdrawn, it is cancelled at once, and its page says no worker will run it.
    decisions.withdraw(execution.approval_id, Actor("olga", execution.requested_by_id), "not needed")
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "none: it never ran</span>" in html and "ran the approver's dry-run" not in html


def test_an_approver_cannot_approve_a_runbook_request_before_its_preview_and_it_keeps_waiting(
        client, auth, dead_run):  # noqa: F811
    run_id, _ = dead_run()
    auth.as_role("operator")
    post(client, auth, "/runbooks/resolve_runs", {"action": "run", "runs": str(run_id), "note": "paid",
                                                  "reason": "refunded by finance"})
    [execution] = executions()
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("approver", "alex")
    request = client.get(f"/approvals/{execution.approval_id}").get_data(as_text=True)
    assert "Not yet: runbook execution" in request and "<button type=\"submit\" disabled>Approve and run" in request
    # Sent anyway (another tab, the API): a 409 that writes nothing; it closed the request as failed (helper 101).
    refused = client.post(f"/approvals/{execution.approval_id}/approve",
                          data={"csrf_token": auth.csrf(f"/approvals/{execution.approval_id}")},
                          follow_redirects=True)
    assert refused.status_code == 409 and "preview has not finished" in refused.get_data(as_text=True)
    db.session.expire_all()
    assert db.session.get(Approval, execution.approval_id).status == "pending"
    runbook_runner.preview(execution.id)
    request = client.get(f"/approvals/{execution.approval_id}").get_data(as_text=True)
    assert "Not yet" not in request and "<button type=\"submit\">Approve and run" in request
    assert client.post(f"/approvals/{execution.approval_id}/approve", data={
        "csrf_token": auth.csrf(f"/approvals/{execution.approval_id}")}).status_code == 303
    # Executed, it has no way back here, and the page says why (it offered nothing, without a word; helper 101).
    executed = client.get(f"/approvals/{execution.approval_id}").get_data(as_text=True)
    assert "This kind of change is not rolled back from here: what a runbook changes is its own code" in executed
    assert "Changes the approver was shown" in client.get(f"/runbooks/executions/{execution.id}").get_data(as_text=True)


def test_a_request_nobody_decided_in_time_reads_expired_before_the_job_marks_it(client, auth, dead_run):  # noqa: F811
    run_id, _ = dead_run()
    auth.as_role("operator")
    response = post(client, auth, "/runbooks/resolve_runs", {"action": "run", "runs": str(run_id), "note": "paid",
                                                             "reason": "refunded by finance"})
    [execution] = executions()
    db.session.execute(update(Approval).where(Approval.id == execution.approval_id)
                       .values(expires_at=utcnow() - timedelta(seconds=5)))
    db.session.commit()
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert '<span class="badge expired">expired</span>' in html
    assert "nobody decided in time: it will not run; ask again if it is still needed" in html
    assert "waits for a second person with the approve permission to decide" not in html


def test_a_secret_named_default_is_never_shown_and_is_used_when_left_empty(samples, app, client, auth):  # noqa: F811
    """`db_password`'s declared default was in GET /api/runbooks for a viewer, pre-filled in the form's plain box and
    printed by `recovery-runbook --list` (helper 154); its execution page and audit row already masked it."""
    listed = client.get("/api/runbooks", headers=bearer(auth.make_user("vic", "viewer"))).get_json()
    [param] = next(item for item in listed if item["name"] == "sample_connects")["params"]
    assert param["default"] == "***"
    user = auth.as_role("operator", "olga")
    form = client.get("/runbooks/sample_connects").get_data(as_text=True)
    assert DECLARED_PASSWORD not in form and 'placeholder="*** (its default, kept when left empty)"' in form
    printed = app.test_cli_runner().invoke(args=["recovery-runbook", "--list"]).output
    assert "--param db_password=…  str, optional; default ***;" in printed and DECLARED_PASSWORD not in printed
    execution = runbooks.start("sample_connects", {"db_password": ""}, _actor(user), scope=None, dry_run=True,
                               enqueue=False)
    runbook_runner.execute(execution.id)
    assert "connected with the declared password" in runbooks.get(execution.id).log


def test_a_real_run_not_started_yet_says_so_not_what_a_preview_found(samples, client, auth):  # noqa: F811
    """It read "0 found by the preview" where no preview had run (helper 157)."""
    user = auth.as_role("operator", "olga")
    execution = runbooks.start("sample_steps", {"steps": 2}, _actor(user), scope=None, dry_run=False, enqueue=False)
    html = client.get(f"/runbooks/executions/{execution.id}").get_data(as_text=True)
    assert "none yet: it has not started" in html and "found by the preview" not in html


def test_the_execution_page_shows_changes_and_log_and_answers_htmx_with_its_region(samples, client, auth):  # noqa: F811
    user = auth.as_role("operator", "olga")
    execution = runbooks.start("sample_steps", {"steps": 2}, _actor(user), scope=None, dry_run=True, enqueue=False)
    runbook_runner.execute(execution.id)
    html = client.get(f"/runbooks/executions/{execution.id}").get_data(as_text=True)
    assert "Changes it would make" in html and "A dry-run changes nothing." in html
    assert "step 1 of 2" in html and "Dry-run done: 2 changes would be made." in html
    assert 'hx-trigger="every 1s"' not in html  # finished: no more polling
    assert "Run this for real" in html
    fragment = client.get(f"/runbooks/executions/{execution.id}", headers=HX).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="rb-execution"') and "<html" not in fragment

    response = post(client, auth, f"/runbooks/executions/{execution.id}/run", {"reason": "as shown"})
    real = executions()[-1]
    assert response.headers["Location"] == f"/runbooks/executions/{real.id}?started=1"
    assert (real.dry_run, real.params, real.reason, real.status) == (False, execution.params, "as shown", "queued")


def test_a_dry_run_whose_real_run_would_be_refused_offers_the_form_not_a_button(client, auth, dead_run):  # noqa: F811
    """A replay with no filter needs every ticked: "Run this for real" was refused, on a page with no such box."""
    dead_run()
    user = auth.as_role("operator", "olga")
    dry = runbooks.start("replay_dead_letters", {"rate": 5}, _actor(user), scope=None, dry_run=True, enqueue=False)
    runbook_runner.execute(dry.id)
    html = client.get(f"/runbooks/executions/{dry.id}").get_data(as_text=True)
    assert "Run this for real" not in html and "A real run with these params is refused: no filter narrows" in html
    link = re.search(r'<a href="([^"]+)">Open the form with these params</a>', html).group(1).replace("&amp;", "&")
    assert link.startswith("/runbooks/replay_dead_letters?") and "rate=5" in link and "every" not in link
    assert 'value="5"' in client.get(link).get_data(as_text=True)


@pytest.mark.parametrize(("given", "shown"), [("5.0", "5"), ("2.5", "2.5"), ("lots", "lots")])
def test_a_links_number_fills_its_box_as_typed(client, auth, given, shown):
    """?rate=5.0 was a 500 (int("5.0")), and ?rate=2.5 showed '2.5' with its quotes."""
    auth.as_role("operator")
    page = client.get(f"/runbooks/replay_dead_letters?rate={given}")
    assert page.status_code == 200
    box = re.search(r'<input[^>]*name="rate"[^>]*>', page.get_data(as_text=True)).group(0)
    assert f'value="{shown}"' in box, box


def test_a_dry_run_that_failed_before_any_change_does_not_say_nothing_needed_changing(samples, client, auth):
    user = auth.as_role("operator", "olga")
    execution = runbooks.start("sample_refuses", {}, _actor(user), scope=None, dry_run=True, enqueue=False)
    runbook_runner.execute(execution.id)
    html = client.get(f"/runbooks/executions/{execution.id}").get_data(as_text=True)
    assert "that range holds more than 1000 firings" in html
    assert "It failed first: its log says why." in html and "Nothing needed changing" not in html


@pytest.mark.parametrize("role", ["viewer", "manager"])
def test_a_reader_sees_the_form_disabled_and_why_and_cannot_start(client, auth, role):
    """A manager got an editable form with no button, under words about asking for approval."""
    auth.as_role(role)
    html = client.get("/runbooks/engine_reconcile").get_data(as_text=True)
    assert "Dry-run</button>" not in html
    assert '<fieldset class="rb-fieldset" disabled>' in html and "takes the\n  operate permission" in html
    gated = client.get("/runbooks/resolve_runs").get_data(as_text=True)
    assert "Asking for it" not in gated and '<fieldset class="rb-fieldset" disabled>' in gated
    assert post(client, auth, "/runbooks/engine_reconcile", {"action": "dry_run"}).status_code == 403
    assert executions() == []


def test_a_tenant_scoped_operator_sees_only_their_tenants_executions(client, auth):
    acme = make_tenant("acme")
    other = runbooks.start("replay_dead_letters", {}, _actor(auth.make_user("root", "operator")), scope=None,
                           dry_run=True, enqueue=False)
    auth.make_user("ann", "operator", tenant=acme)
    auth.login("ann")
    form = client.get("/runbooks/replay_dead_letters").get_data(as_text=True)
    assert 'id="tenant"' not in form
    response = post(client, auth, "/runbooks/replay_dead_letters", {"action": "dry_run", "age": "any", "rate": "5"})
    mine = executions()[-1]
    assert response.status_code == 303 and mine.tenant_id == acme.id
    assert client.get(f"/runbooks/executions/{other.id}").status_code == 404
    assert f"#{other.id}<" not in client.get("/runbooks").get_data(as_text=True)
    blocked = client.get("/runbooks/engine_reconcile").get_data(as_text=True)
    assert "only people not limited to a tenant may run it" in blocked and "Dry-run</button>" not in blocked


def test_an_admin_requires_approval_for_a_runbook_audited(client, auth):
    auth.as_role("operator", "olga")
    assert post(client, auth, "/admin/runbooks/backfill_task", {"requires_approval": "1"}).status_code == 403
    client.post("/logout", data={"csrf_token": auth.csrf("/runbooks")})
    auth.as_role("admin", "ada")
    page = client.get("/admin/runbooks").get_data(as_text=True)
    assert "always, for high risk" in page and "Require approval" in page
    response = client.post("/admin/runbooks/backfill_task", data={"csrf_token": auth.csrf("/admin/runbooks"),
                                                                  "requires_approval": "1"})
    assert response.status_code == 303
    assert runbooks.approval_needed(runbooks.require("backfill_task"))
    db.session.expire_all()
    entry = db.session.execute(select(AuditEntry).where(AuditEntry.action == "runbook.policy")).scalar_one()
    assert (entry.actor, entry.target_id, entry.after) == ("ada", "backfill_task", {"requires_approval": True})
    assert "Request approval to run" in client.get("/runbooks/backfill_task").get_data(as_text=True)


def test_a_runbook_request_says_when_its_dry_run_looked_and_what_the_execution_made(client, auth, dead_run):  # noqa: F811
    (first, _), (second, _) = dead_run(), dead_run()
    operator = auth.make_user("olga", "operator")
    execution = runbooks.start("resolve_runs", {"runs": f"{first} {second}", "note": "paid"}, _actor(operator),
                               scope=None, reason="refunded by finance", enqueue=False)
    runbook_runner.preview(execution.id)
    db.session.expire_all()
    looked = db.session.get(RunbookExecution, execution.id).previewed_at
    auth.as_role("approver")
    page = client.get(f"/approvals/{execution.approval_id}").get_data(as_text=True)
    assert f"Found by a dry-run at {looked:%Y-%m-%d %H:%M:%S} UTC, when it was asked for: rows may have" in page
    # One of the two is settled another way before the approval: the execution makes fewer changes than planned.
    control.retry_now(db.session.get(Run, second), Actor("bea"))
    decisions.approve(execution.approval_id, Actor("alex", auth.make_user("alex", "approver").id))
    runbook_runner.execute(execution.id)
    db.session.expire_all()
    done = db.session.get(RunbookExecution, execution.id)
    planned = runbooks.changes(execution.id, planned=True)[1]
    assert done.status == "succeeded" and done.changes_total < planned
    page = client.get(f"/approvals/{execution.approval_id}").get_data(as_text=True)
    assert f"Execution #{execution.id} made {done.changes_total} of them" in page
