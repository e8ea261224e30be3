"""Four eyes in real Chromium: an operator files a params fix from the DLQ, an approver approves it from the inbox."""

import json
import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import Approval, DeadLetter, Run
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants, users
from console.services.policies import versions as policies
from tests.helpers import ARTIFACTS, PASSWORD, browser_login, wait_for

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")
BROKEN = {"fail_times": 3, "code": "bad_account", "message": "account 42 is closed", "api_key": "sk_live_old0001"}
FIXED = {**BROKEN, "fail_times": 0, "api_key": "sk_live_new0002"}  # the key rotated too


@pytest.fixture
def dead_run(live_app) -> int:
    """A run of demo.flaky that ran out of attempts: replayed as it is it fails again, with fail_times 0 it succeeds."""
    policies.save("browser", {"max_attempts": 1, "base_delay_s": 1, "multiplier": 2, "jitter": 0,
                              "breaker": {"failure_threshold": 100}}, ARRANGE)
    run, _ = submit(tenants.find("default"), ARRANGE, handler="demo.flaky", policy="browser", params=BROKEN)
    execute(run.id, 0, clock=FrozenClock(utcnow() - timedelta(minutes=2)))
    assert db.session.get(Run, run.id).status == "dead"
    users.create("olga", "operator", PASSWORD, ARRANGE)
    users.create("alex", "approver", PASSWORD, ARRANGE)
    return run.id


def status_of(run_id: int) -> str:
    db.session.commit()
    db.session.expire_all()
    return db.session.get(Run, run_id).status


def csrf_of(page) -> str:
    return re.search(r'"X-CSRFToken": "([^"]+)"', page.locator("body").get_attribute("hx-headers")).group(1)


def test_an_approvers_day(page, browser, live_server, live_app, dead_run, live_worker, screenshot):
    base = live_server.url
    letter = db.session.query(DeadLetter).filter_by(run_id=dead_run).one()

    # The operator finds the dead letter and asks for its params to be fixed.
    browser_login(page, base, "olga", then="/dlq/?view=list")
    row = page.locator("tr.dl-row", has_text="account 42 is closed")
    row.get_by_role("link", name="Fix params…").click()
    expect(page.get_by_role("heading", name=re.compile(f"dead letter #{letter.id}"))).to_be_visible()
    params = page.get_by_label("New params (JSON)")
    assert json.loads(params.input_value()) == BROKEN  # prefilled with the run's params
    params.fill('{"fail_times": 0, "code": "bad_account",}')
    page.get_by_label("Reason").fill("the customer reopened account 42 (ticket OPS-311)")
    page.get_by_role("button", name="Ask for approval").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid JSON")  # the field says what to fix
    page.get_by_label("New params (JSON)").fill(json.dumps(FIXED, indent=2))
    page.get_by_role("button", name="Ask for approval").click()
    expect(page.get_by_role("heading", name=re.compile(r"Request #\d+"))).to_be_visible()
    request_id = int(re.search(r"/approvals/(\d+)$", page.url).group(1))
    expect(page.locator(".flash.success")).to_contain_text(f"Filed request #{request_id}")
    expect(page.locator("table.approval-diff")).to_contain_text("params.fail_times")
    expect(page.get_by_role("button", name="Approve and run")).to_have_count(0)  # never offered to the requester
    expect(page.get_by_text("another person with the approve permission decides it")).to_be_visible()
    screenshot("approvers-day-requested")
    # Posting the approval anyway is refused by the server.
    refused = page.request.post(f"{base}/approvals/{request_id}/approve", form={"csrf_token": csrf_of(page)})
    assert refused.status == 403
    assert status_of(dead_run) == "dead"

    # The operator watches the Overview in another tab while they wait; the request's tab stays open.
    request_tab, page = page, page.context.new_page()
    page.goto(f"{base}/overview")
    answered = page.locator("header nav").get_by_role("link", name=re.compile("^Approvals")).locator(".nav-count")
    expect(answered).to_have_count(0)

    # The approver, in a second browser, sees one request waiting and approves it from the inbox.
    approver = browser.new_context()
    try:
        second = approver.new_page()
        browser_login(second, base, "alex")
        approvals_link = second.locator("header nav").get_by_role("link", name=re.compile("^Approvals"))
        expect(approvals_link.locator(".nav-count")).to_have_text("1")
        approvals_link.click()
        inbox_row = second.locator("table.approvals tbody tr", has_text="olga")
        expect(inbox_row).to_contain_text("the customer reopened account 42")
        second.screenshot(path=str(ARTIFACTS / "approvers-day-inbox.png"), full_page=True)
        inbox_row.get_by_role("link", name=f"#{request_id}", exact=True).click()
        expect(second.locator("table.approval-diff")).to_contain_text("params.fail_times")
        # The key changes too: a row of its own, its values masked (masked alike, it was no row at all).
        key_row = second.locator("table.approval-diff tr", has_text="params.api_key")
        expect(key_row).to_contain_text('"*** (changed)"')
        assert "sk_live" not in second.content()
        second.get_by_label("Note (optional)").fill("checked with billing")
        second.get_by_role("button", name="Approve and run").click()
        expect(second.locator(".flash.success")).to_contain_text(f"Approved request #{request_id}")
        expect(second.locator("h1")).to_contain_text("executed")
        second.screenshot(path=str(ARTIFACTS / "approvers-day-approved.png"), full_page=True)
    finally:
        approver.close()

    # A real worker runs the replay with the fixed params, and the run recovers.
    wait_for(lambda: status_of(dead_run) == "succeeded", 60, 0.3, f"run {dead_run} to succeed after the fix")
    run = db.session.get(Run, dead_run)
    assert (run.series, run.params["fail_times"], run.params["api_key"]) == (2, 0, "sk_live_new0002")
    approval = db.session.get(Approval, request_id)
    assert (approval.status, approval.decision_note) == ("executed", "checked with billing")
    # The operator's console counts the answer beside Approvals until they read their requests: on the Overview
    # they sit on, with its own refresh, no reload.
    expect(answered).to_have_text("1", timeout=15_000)
    screenshot("approvers-day-answer-counted")
    page.locator("header nav").get_by_role("link", name=re.compile("^Approvals")).click()
    expect(page).to_have_url(re.compile(r"/approvals/mine$"))
    expect(page.locator("table.approvals")).to_contain_text("executed")
    expect(page.locator("table.approvals")).to_contain_text("checked with billing")
    expect(page.locator("table.approvals tr.answered-news")).to_contain_text("new")  # which one is the answer
    expect(answered).to_have_count(0)

    # The request's tab, left open since filing, still offers Withdraw: refused in place, and its old "Filed request"
    # message goes with it (it stood above the refusal, saying the opposite).
    request_tab.bring_to_front()
    request_tab.once("dialog", lambda dialog: dialog.accept())
    request_tab.get_by_role("button", name="Withdraw").click()
    expect(request_tab.get_by_role("alert")).to_contain_text(f"request {request_id} is executed, no longer pending")
    expect(request_tab.locator(".flash.success")).to_have_count(0)

