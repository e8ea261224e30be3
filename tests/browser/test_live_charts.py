"""A page left open all day: its live region's chart, redrawn at every refresh, does not pile up in the browser.

The Overview swaps its live region (with the failures chart) every 5 s; the chart swapped out stayed alive through
Plotly's window resize handler: a tab grew by ~1.5 MB a minute, 2 → 36 resize listeners in 6 minutes (helper 131).
Measured on a demo console's Overview over 3 minutes of real polls: before, 2 → 13 resize listeners and 2,106 →
15,088 DOM nodes after garbage collection; after, 2 → 2 and 2,164 → 2,241.
"""

import pytest

from tests.helpers import browser_login

pytestmark = pytest.mark.browser
REFRESHES = 8


def resize_listeners(page) -> int:
    """Count the window's resize listeners, as DevTools does (Plotly adds one per responsive chart)."""
    cdp = page.context.new_cdp_session(page)
    window = cdp.send("Runtime.evaluate", {"expression": "window"})["result"]["objectId"]
    listeners = cdp.send("DOMDebugger.getEventListeners", {"objectId": window})["listeners"]
    cdp.detach()
    return sum(1 for listener in listeners if listener["type"] == "resize")


def refresh_live_region(page) -> None:
    """Swap the Overview's live region in again, as its every-5-s poll does when what it shows changed."""
    page.evaluate("""() => htmx.ajax("GET", "/overview", {source: document.body, target: "#live", swap: "outerHTML",
                                                         select: "#live"})""")


def test_the_overview_left_open_keeps_one_chart_however_often_it_refreshes(page, live_server):
    browser_login(page, live_server.url, then="/overview")
    page.wait_for_selector("#failures-chart .main-svg")
    before = resize_listeners(page)
    first = page.evaluate("() => document.getElementById('failures-chart')")
    for _ in range(REFRESHES):
        refresh_live_region(page)
    page.wait_for_selector("#failures-chart .main-svg")
    assert page.evaluate("(old) => old !== document.getElementById('failures-chart')", first)  # swapped, not kept
    # Each draw purges the charts the swap before it took off the page: as many listeners as at the start.
    assert resize_listeners(page) == before
    assert page.locator(".js-plotly-plot").count() == page.locator("[data-figure]").count()
