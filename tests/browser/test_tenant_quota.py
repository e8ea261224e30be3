"""Configuring the planner in real Chromium: a tenant with a quota, a run that says it waits for it, the forecast."""

import re

import pytest
from playwright.sync_api import expect

from console.extensions import db
from console.models import Run
from console.services.actor import Actor
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.scheduling import tasks
from tests.helpers import browser_login, wait_for

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")


def status_of(run_id: int) -> str:
    db.session.commit()
    db.session.expire_all()
    return db.session.get(Run, run_id).status


def test_an_admin_sets_a_tenant_quota_and_sees_a_run_wait_for_it(page, live_server, live_app, two_workers,
                                                                  screenshot):
    base = live_server.url
    page.set_viewport_size({"width": 1440, "height": 900})
    browser_login(page, base)

    # Create the tenant with a quota of one running run, from the Tenants page.
    page.goto(f"{base}/admin/users")
    page.get_by_role("link", name="Tenants").click()
    page.get_by_label("Name").fill("acme")
    page.get_by_label("Max running").fill("1")
    page.get_by_role("button", name="Create tenant").click()
    expect(page.locator(".flash.success")).to_contain_text("Created tenant acme: at most 1 running")

    # One long run holds the tenant's only slot; the next one must wait, and say why.
    acme = tenants.find("acme")
    holder, _ = submit(acme, ARRANGE, handler="demo.sleep", params={"seconds": 600})  # cancelled at the end
    wait_for(lambda: status_of(holder.id) == "running", 60, 0.1, "the holder to start")
    waiting, _ = submit(acme, ARRANGE, handler="demo.noop")
    page.goto(f"{base}/runs/{waiting.id}")
    reason = page.locator(".run-waiting")
    expect(reason).to_contain_text("tenant quota: tenant acme is running 1 of its max_running 1", timeout=30_000)
    assert status_of(waiting.id) == "pending"
    screenshot("tenant-quota-run-waits")

    page.goto(f"{base}/admin/tenants")
    row = page.locator("#tenant-acme")
    expect(row).to_contain_text("1 of 1")
    expect(row.locator(".badge")).to_contain_text("full")
    screenshot("tenants-page")

    # Raising the quota lets the waiting run start at its next check, well before the holder ends.
    row.get_by_label("running").fill("2")
    row.get_by_role("button", name="Save").click()
    expect(page.locator(".flash.success")).to_contain_text("Saved acme: at most 2 running")
    page.goto(f"{base}/runs/{waiting.id}")
    expect(page.locator("#run-detail h1")).to_contain_text("succeeded", timeout=15_000)
    expect(page.locator(".run-waiting")).to_have_count(0)
    assert status_of(holder.id) == "running"  # it was not the holder finishing that let it through


def test_the_conflict_forecast_is_linked_from_tasks(page, live_server, live_app, screenshot):
    default = tenants.find("default")
    for body in ({"name": "export-orders", "cron": "*/15 * * * *", "mutex_key": "orders-db"},
                 {"name": "reindex-orders", "cron": "*/30 * * * *", "mutex_key": "orders-db",
                  "concurrency_policy": "forbid"},
                 {"name": "nightly-ledger-close", "cron": "30 23 * * *", "window": {"start": "00:00", "end": "05:00"}}):
        tasks.register(default, {"handler": "demo.noop", "timezone": "UTC", **body}, ARRANGE)
    base = live_server.url
    page.set_viewport_size({"width": 1440, "height": 900})
    browser_login(page, base, then="/tasks")
    page.get_by_role("link", name="Conflict forecast").click()
    expect(page.get_by_role("heading", name="Conflict forecast")).to_be_visible()
    expect(page.locator("table").first).to_contain_text("orders-db")
    expect(page.get_by_role("link", name="nightly-ledger-close")).to_be_visible()
    screenshot("forecast-24h")
    page.get_by_label("Next").select_option("7d")
    page.get_by_role("button", name="Forecast").click()
    expect(page).to_have_url(re.compile(r"horizon=7d"))
    screenshot("forecast-7d")
