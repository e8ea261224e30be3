"""A saga in real Chromium: submitted from the form, run by a real worker, undone backward, read on its page."""

import json
import re

import pytest
from playwright.sync_api import expect

from console.domain.clock import FrozenClock, utcnow
from tests.factories import Saga, make_tenant, three_steps
from tests.helpers import browser_login

pytestmark = pytest.mark.browser


def test_a_workflow_submitted_from_the_form_is_undone_backward_on_its_live_page(page, live_server, live_worker,
                                                                              screenshot):
    base = live_server.url
    browser_login(page, base)
    page.wait_for_url("**/overview")
    page.get_by_role("link", name="Runs").click()
    page.get_by_role("link", name="Workflows").click()
    expect(page.get_by_text("No workflows yet.")).to_be_visible()
    page.get_by_role("link", name="New workflow").click()
    screenshot("workflow-form")

    page.get_by_label("Name").fill("ship order 7")
    page.get_by_label("Steps (JSON list)").fill("[{\"handler\": \"demo.noop\"}, {\"handler\": ")
    page.get_by_role("button", name="Submit workflow").click()
    expect(page.locator("#steps-error")).to_contain_text("steps is not valid JSON")
    screenshot("workflow-form-error")

    page.get_by_label("Steps (JSON list)").fill(json.dumps(three_steps(), indent=2))
    page.get_by_role("button", name="Submit workflow").click()
    expect(page.get_by_role("heading", name=re.compile(r"Workflow #\d+"))).to_be_visible()
    # The page refreshes itself while the worker runs the steps, then undoes 2 and 1.
    expect(page.locator("#workflow-detail h1")).to_contain_text("compensated", timeout=60_000)
    trail = page.locator("table.wf-trail tbody tr")
    expect(trail).to_have_count(5)
    expect(trail.nth(1)).to_contain_text("undo try failed")
    screenshot("workflow-compensated")

    page.locator("table.wf-steps tbody tr").nth(1).get_by_role("link").click()
    expect(page.locator("#run-detail")).to_contain_text("step 2 of 3")
    page.get_by_role("link", name=re.compile(r"#\d+ ship order 7")).click()
    expect(page.get_by_role("heading", name=re.compile(r"Workflow #\d+"))).to_be_visible()
    page.get_by_role("link", name="Workflows").first.click()
    expect(page.locator("table.workflows")).to_contain_text("ship order 7")
    screenshot("workflow-list")


def submit_from_the_form(page, base: str, name: str, steps: list[dict]) -> None:
    """Log in, submit a workflow from its form, and wait for it to stop for a person."""
    browser_login(page, base)
    page.wait_for_url("**/overview")
    page.goto(f"{base}/runs/workflows/new")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Steps (JSON list)").fill(json.dumps(steps))
    page.get_by_role("button", name="Submit workflow").click()
    expect(page.locator("#workflow-detail h1")).to_contain_text("compensation failed", timeout=60_000)


def test_a_step_with_no_undo_stops_the_workflow_for_a_person(page, live_server, live_worker, screenshot):
    submit_from_the_form(page, live_server.url, "notify, then charge", [
        {"handler": "demo.flaky_compensated", "params": {"fail_times": 0}}, {"handler": "demo.noop"},
        {"handler": "demo.flaky", "params": {"fail_times": 9, "error": "fatal", "code": "card_declined"}}])
    expect(page.get_by_role("alert")).to_contain_text("step 2 is not compensable")
    steps_table = page.locator("table.wf-steps tbody tr")
    expect(steps_table.nth(0)).to_contain_text("not attempted")
    expect(steps_table.nth(1)).to_contain_text("not compensable")
    screenshot("workflow-needs-a-person")


def test_a_search_half_typed_on_the_workflows_list_outlives_its_refresh(page, live_server, live_app):
    make_tenant("globex")
    saga = Saga(FrozenClock(utcnow()))
    saga.submit(three_steps(), key="order-1", name="ship order 1")
    browser_login(page, live_server.url, then="/runs/workflows")
    tenant = page.get_by_label("Tenant")
    tenant.select_option("globex")  # chosen, not yet sent
    search = page.get_by_label("Number, name or idempotency key")
    search.press_sequentially("order-")

    saga.submit(three_steps(), key="order-2", name="ship order 2")  # the list changes: its 5 s read swaps it
    expect(page.locator("table.workflows")).to_contain_text("ship order 2", timeout=20_000)
    expect(search).to_have_value("order-")
    expect(search).to_be_focused()
    expect(tenant).to_have_value("globex")
    search.press_sequentially("7")
    expect(search).to_have_value("order-7")


def test_a_step_left_for_a_person_holds_the_undo_until_they_run_its_own(page, live_server, live_worker, screenshot):
    """Its error's severity 3 left step 2 for a person: step 1 stays as it is until step 2's undo has run."""
    submit_from_the_form(page, live_server.url, "reserve, then label", [
        {"handler": "demo.flaky_compensated", "params": {"fail_times": 0}},
        {"handler": "demo.flaky_compensated",
         "params": {"fail_times": 9, "error": "compensable", "severity": 3, "code": "label_unclear"}}])
    expect(page.get_by_role("alert")).to_contain_text("step 2 failed for good and waits for a person")
    rows = page.locator("table.wf-steps tbody tr")
    expect(rows.nth(0)).to_contain_text("not attempted")
    expect(rows.nth(1)).to_contain_text("manual intervention")
    screenshot("workflow-held-for-a-person")

    page.get_by_role("link", name="run the undo of step 2").click()
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.get_by_role("button", name="Run the undo").click()
    expect(page.locator("#run-detail h1")).to_contain_text("compensat", timeout=30_000)
    assert "goes back to undoing: step 2, then the steps before it." in asked[0]
    page.get_by_role("link", name=re.compile(r"#\d+ reserve, then label")).click()
    expect(page.locator("#workflow-detail h1")).to_contain_text("compensated", timeout=60_000)
    expect(rows.nth(0)).to_contain_text("compensated")
    expect(rows.nth(1)).to_contain_text("compensated")
