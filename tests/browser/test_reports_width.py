"""A manager's Reports at laptop widths: no report table hides a column in a sideways-scrolling frame."""

import re

import pytest
from playwright.sync_api import expect

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


# Each trend card's open table: how far it (or a value in it) reaches past its card, in px (0 when it fits).
PAST_CARDS = """() => [...document.querySelectorAll('.trend-panel')].map(card => {
  const right = card.getBoundingClientRect().right;
  return [...card.querySelectorAll('details[open] table, details[open] td')]
    .reduce((most, el) => Math.max(most, el.getBoundingClientRect().right - right), 0);
})"""


def test_each_trend_cards_table_fits_its_card_at_1280_and_1024(page, live_server, history):
    browser_login(page, live_server.url)
    for size in ({"width": 1280, "height": 720}, {"width": 1024, "height": 700}):
        page.set_viewport_size(size)
        page.goto(f"{live_server.url}/reports/?period=7d")
        summaries = page.locator(".trend-panel summary")
        assert summaries.count() > 3
        for summary in summaries.all():
            summary.focus()
            page.keyboard.press("Enter")
        expect(page.locator(".trend-panel details[open]")).to_have_count(summaries.count())
        assert max(page.evaluate(PAST_CARDS)) <= 0, (size, page.evaluate(PAST_CARDS))
        assert page.evaluate("document.scrollingElement.scrollWidth - innerWidth") <= 0, size
        completed = page.locator(".trend-panel", has_text="Work orders completed").locator("td.num").first
        expect(completed).to_have_text(re.compile(r"^(—|\d+\.\d %)$"))
