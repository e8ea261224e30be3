"""A fresh console's empty tables at a laptop's 1024 px: each says what will appear there, wrapped in its frame."""

import pytest

from tests.helpers import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.layout]
EMPTY_PAGES = ["/breakers/", "/dlq/?view=list", "/workorders/", "/approvals/", "/runbooks/", "/runs/", "/tasks/",
               "/reports/breaches", "/audit/?action=nothing.such"]


def test_an_empty_tables_message_wraps_inside_its_frame(page, live_server):
    browser_login(page, live_server.url)
    page.set_viewport_size({"width": 1024, "height": 768})
    for path in EMPTY_PAGES:
        page.goto(f"{live_server.url}{path}")
        assert page.locator("td.empty").count() >= 1, path
        frames = page.evaluate("[...document.querySelectorAll('.table-wrap')].map(f => f.scrollWidth - f.clientWidth)")
        assert all(over <= 1 for over in frames), (path, frames)
