"""A runbook in real Chromium against a real server and worker: its dry-run, then a real run with its log streaming."""

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import Run
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.policies import versions as policies
from tests.helpers import browser_login, wait_for

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")


@pytest.fixture
def dead_runs(live_app) -> list[int]:
    """Five runs parked in the DLQ with code carrier_down; each succeeds when replayed.

    Asked for before live_worker: a worker already running would take the submitted job before execute() here.
    """
    policies.save("browser", {"max_attempts": 1, "jitter": 0, "breaker": {"failure_threshold": 100}}, ARRANGE)
    made = []
    for parcel in range(5):
        clock = FrozenClock(utcnow() - timedelta(minutes=2))
        params = {"fail_times": 1, "code": "carrier_down", "message": f"carrier api down, parcel {parcel}"}
        run, _ = submit(tenants.find("default"), ARRANGE, handler="demo.flaky", policy="browser", params=params)
        assert execute(run.id, 0, clock=clock) == "dead"
        made.append(run.id)
    return made


def statuses(run_ids: list[int]) -> set[str]:
    db.session.commit()
    db.session.expire_all()
    return {db.session.get(Run, run_id).status for run_id in run_ids}


def test_a_dry_run_then_a_real_run_with_its_log_streaming(page, live_server, dead_runs, live_worker, screenshot):
    base = live_server.url
    browser_login(page, base)
    page.get_by_role("link", name="Runbooks").click()
    expect(page.get_by_role("heading", name="Runbooks")).to_be_visible()
    row = page.locator("tr", has_text="Mark dead runs resolved")
    expect(row).to_contain_text("high risk")
    expect(row).to_contain_text("needs approval")
    screenshot("runbooks-list")

    page.get_by_role("link", name="Replay dead letters by filter").click()
    page.get_by_label("Code (optional)").fill("carrier_down")
    page.get_by_label("Rate (optional)").fill("0")
    page.get_by_role("button", name="Dry-run").click()
    expect(page.locator("#rate-error")).to_have_text("at least 1")  # the field says what is wrong
    expect(page.get_by_label("Code (optional)")).to_have_value("carrier_down")
    screenshot("runbooks-form-error")
    page.get_by_label("Rate (optional)").fill("1")
    page.get_by_role("button", name="Dry-run").click()

    # The worker dry-runs it; the page polls itself until it is done.
    expect(page).to_have_url(re.compile(r"/runbooks/executions/\d+\?started=1$"))
    expect(page.locator(".flash.success")).to_contain_text("Started execution #")  # said on its own page
    log = page.locator("#rb-log")
    expect(log).to_contain_text("Dry-run done: 10 changes would be made.", timeout=30_000)
    expect(page.locator("#rb-execution h1")).to_contain_text("succeeded")
    expect(page.locator("table.rb-changes tbody tr")).to_have_count(10)
    assert statuses(dead_runs) == {"dead"}  # a dry-run changed nothing
    screenshot("runbooks-dry-run")

    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_label("Reason (optional)").fill("the carrier is back")
    page.get_by_role("button", name="Run this for real").click()
    expect(page.locator(".flash.success")).to_contain_text("(for real): a worker runs it")
    # One dead letter a second: the log grows on the page while the run is still running.
    expect(log).to_contain_text("Replayed 1 (#", timeout=30_000)
    expect(page.locator("#rb-execution h1")).to_contain_text("running")
    assert "Done:" not in log.inner_text()
    screenshot("runbooks-live-log")
    expect(log).to_contain_text("Done: 10 changes made.", timeout=30_000)
    expect(page.locator("#rb-execution h1")).to_contain_text("succeeded")
    expect(page.get_by_role("heading", name=re.compile("Changes made"))).to_be_visible()
    screenshot("runbooks-done")
    wait_for(lambda: statuses(dead_runs) == {"succeeded"}, 60, 0.5, "the replayed runs to succeed")


def test_a_high_risk_runbook_waits_for_approval_showing_the_approver_its_preview(page, live_server, dead_runs,
                                                                                live_worker, screenshot):
    base = live_server.url
    browser_login(page, base, then="/runbooks/resolve_runs")
    expect(page.locator(".rb-gate")).to_contain_text("second person's approval")
    page.get_by_label("Runs (run ids)").fill(", ".join(map(str, dead_runs[:2])))
    page.get_by_label("Note").fill("refunded by hand")
    page.get_by_role("button", name="Request approval to run").click()
    expect(page.locator("#reason-error")).to_contain_text("give a reason")
    page.get_by_label("Reason", exact=True).fill("the customer was refunded by phone")
    page.get_by_role("button", name="Request approval to run").click()
    expect(page.locator(".flash.success")).to_contain_text("Asked for approval")
    expect(page.locator("#rb-execution h1")).to_contain_text("awaiting approval")
    approval = page.locator(".rb-approval")
    expect(approval.get_by_role("link", name=re.compile(r"Request #\d+"))).to_have_attribute(
        "href", re.compile(r"^/approvals/\d+$"))
    expect(page.get_by_role("heading", name=re.compile("Changes the approver is shown"))).to_be_visible(
        timeout=30_000)
    expect(page.locator("table.rb-changes tbody tr")).to_have_count(4)  # two runs, two dead letters
    expect(approval).to_contain_text("pending")
    screenshot("runbooks-awaiting-approval")
    assert statuses(dead_runs[:2]) == {"dead"}  # nothing runs before another person approves
