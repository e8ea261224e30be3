"""A capacity reservation in real Chromium with real workers: another tenant waits for it until it is cancelled."""

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from console.domain.clock import utcnow
from console.services.actor import Actor
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.scheduling import reservations
from tests.browser.test_tenant_quota import status_of
from tests.factories import make_tenant
from tests.helpers import browser_login, wait_for

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")


def test_a_reserved_slot_is_kept_from_another_tenant_until_cancelled(page, live_server, live_app, two_workers,
                                                                    screenshot):
    acme, _ = make_tenant("acme"), make_tenant("globex")
    # globex holds all but one of the promised slots and uses none: acme gets that one, and no second.
    capacity = live_app.config["CAPACITY_RUNNING"]
    held = reservations.create("globex", ARRANGE, running_slots=capacity - 1, queued_runs=1000, starts_at=utcnow(),
                               ends_at=utcnow() + timedelta(hours=2), reason="month-end close")
    # Sleeps until cancelled at the end: a loaded machine's clicks must not outlast it.
    holder, _ = submit(tenants.find("acme"), ARRANGE, handler="demo.sleep", params={"seconds": 600})
    wait_for(lambda: status_of(holder.id) == "running", 60, 0.1, "the holder to start")
    waiting, _ = submit(acme, ARRANGE, handler="demo.noop")

    base = live_server.url
    page.set_viewport_size({"width": 1440, "height": 900})
    browser_login(page, base)
    page.goto(f"{base}/runs/{waiting.id}")
    expect(page.locator(".run-waiting")).to_contain_text(
        f"reserved capacity: 1 of the {capacity} promised running slots are in use", timeout=30_000)
    assert status_of(waiting.id) == "pending"
    screenshot("reservation-run-waits")

    page.goto(f"{base}/tasks/forecast")
    expect(page.locator("body")).to_contain_text("month-end close")
    screenshot("reservation-forecast")
    page.goto(f"{base}/admin/tenants")
    row = page.locator(f"#reservation-{held['id']}")
    expect(row).to_contain_text("month-end close")
    screenshot("reservation-tenants-page")
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Cancel").click()
    expect(page.locator(".flash.success")).to_contain_text(f"Cancelled reservation {held['id']} of globex")
    page.goto(f"{base}/runs/{waiting.id}")
    expect(page.locator("#run-detail h1")).to_contain_text("succeeded", timeout=15_000)
    assert status_of(holder.id) == "running"  # the cancel let it through, not the holder finishing
