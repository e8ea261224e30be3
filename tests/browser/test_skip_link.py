"""A keyboard user's first Tab lands on "Skip to content", which shows itself and moves focus to the page's main."""

import pytest
from playwright.sync_api import expect

from tests.helpers import browser_login

pytestmark = pytest.mark.browser


def in_view(page, locator) -> bool:
    box = locator.bounding_box()
    size = page.viewport_size
    return box is not None and box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= size["width"] \
        and box["y"] + box["height"] <= size["height"]


def test_the_first_tab_focuses_a_visible_skip_link_and_enter_moves_focus_to_main(page, live_server):
    browser_login(page, live_server.url, then="/dlq/")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_have_attribute("href", "#content")
    assert not in_view(page, skip)  # out of sight until a keyboard reaches it

    page.keyboard.press("Tab")
    expect(skip).to_be_focused()
    assert in_view(page, skip)

    page.keyboard.press("Enter")
    expect(page.locator("main#content")).to_be_focused()
    page.keyboard.press("Tab")  # the next stop is inside the page, past the navigation
    assert page.evaluate("() => document.querySelector('main').contains(document.activeElement)")
