"""The top bar at laptop widths: an admin's thirteen links and the approvals badge fit on one row."""

import pytest
from playwright.sync_api import expect

from console.services.engine.execute import execute
from console.services.system import demo_roles
from tests.factories import BROKEN, LENIENT, Runs
from tests.helpers import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.layout]
ROWS = ("() => new Set([...document.querySelectorAll('.topbar nav a')]"
        ".map(a => Math.round(a.getBoundingClientRect().top))).size")


def test_an_admins_navigation_with_a_waiting_request_is_one_row_from_1100_px_up(page, live_server, live_app, clock):
    run_id = Runs().submit("demo.flaky", BROKEN, policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    assert "waits for an approver" in demo_roles.file_waiting_fix()  # real time, as the badge counts: one request waits
    browser_login(page, live_server.url, then="/overview")
    expect(page.locator(".topbar nav").get_by_role("link", name="Approvals")).to_contain_text("1")
    for width in (1440, 1280, 1200, 1100):
        page.set_viewport_size({"width": width, "height": 800})
        assert page.evaluate(ROWS) == 1, width
        assert page.locator(".topbar").bounding_box()["height"] <= 53, width
    page.set_viewport_size({"width": 1024, "height": 800})
    assert page.evaluate(ROWS) == 2  # it wraps rather than overflow; under 900 px the links fold behind Menu
    assert page.evaluate("(bar => bar.scrollWidth <= bar.clientWidth)(document.querySelector('.topbar'))")
