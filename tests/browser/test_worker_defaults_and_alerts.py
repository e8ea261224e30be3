"""The worker pool's defaults on Queues & workers, and the seeds' last alert rules on Admin → Alert rules."""

import pytest
from playwright.sync_api import expect

from console import metrics
from console.domain.clock import FrozenClock, utcnow
from console.services.system import alert_rules
from tests.helpers import browser_login

pytestmark = pytest.mark.browser


def test_the_queues_page_shows_the_worker_defaults_and_admins_edit_the_new_rules(page, live_server, live_app,
                                                                                   screenshot):
    metrics.LOCK_ATTEMPTS.inc_now(20, at=utcnow(), lock="planner")
    metrics.LOCK_CONTENDED.inc_now(17, at=utcnow(), lock="planner")
    alert_rules.evaluate(FrozenClock(utcnow()))
    base = live_server.url
    browser_login(page, base, then="/queues/")
    section = page.locator("table.worker-defaults")
    expect(page.get_by_role("heading", name="Worker pool defaults")).to_be_visible()
    expect(section.locator("tr", has_text="pool.processes")).to_contain_text("worker processes")
    expect(section.locator("tr", has_text="defaults.timeout_s")).to_contain_text("300 s")
    page.locator("#worker-defaults").scroll_into_view_if_needed()
    screenshot("worker-defaults")
    page.goto(f"{base}/admin/alert-rules")
    row = page.locator("tr, li, article, div.rule", has_text="Lock contention high: consider scaling out").last
    expect(row).to_contain_text("85%")
    for title in ("Progress write-back failure rate high", "Timeouts well above usual"):
        expect(page.get_by_text(title)).to_be_visible()
    screenshot("alert-rules-seeds")
