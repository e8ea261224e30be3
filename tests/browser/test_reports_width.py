"""A manager's Reports at laptop widths: no report table hides a column in a sideways-scrolling frame."""

import pytest

from console.services.reports import rollup
from console.services.system.demo_reports import seed_report_history
from tests.factories import make_tenant
from tests.helpers import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.layout]
OVERFLOW = "[...document.querySelectorAll('.table-wrap')].map(frame => frame.scrollWidth - frame.clientWidth)"


@pytest.fixture
def history(live_app):
    """A week of history as the demo writes it: six tasks' late starts, missed deadlines, dead letters."""
    make_tenant("acme"), make_tenant("globex")
    seed_report_history(3000, 7, 6)
    rollup.rebuild()


def test_the_report_tables_fit_at_1280_and_the_breaches_at_1024(page, live_server, history):
    browser_login(page, live_server.url)
    for width in (1280, 1200):
        page.set_viewport_size({"width": width, "height": 800})
        page.goto(f"{live_server.url}/reports/?period=7d")
        assert "Tasks, most failures first" in page.content()
        assert page.evaluate(OVERFLOW) == [0, 0], width  # the tasks table, Top error fingerprints
    for width in (1280, 1024):
        page.set_viewport_size({"width": width, "height": 800})
        page.goto(f"{live_server.url}/reports/breaches?period=7d")
        assert page.locator("table.breaches-table tbody tr").count() > 10
        assert page.evaluate(OVERFLOW) == [0], width
