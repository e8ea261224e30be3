"""The task form's cron preview follows the field however the text got there: typed, or pasted with the mouse."""

import pytest
from playwright.sync_api import expect

from tests.helpers import browser_login

pytestmark = pytest.mark.browser


def test_a_pasted_cron_expression_is_previewed_without_a_key_pressed(page, live_server, live_app):
    browser_login(page, live_server.url, then="/tasks/new")
    # fill() sets the value and fires `input`, as a paste from the mouse does: no key is pressed.
    page.locator("#cron").fill("30 2 * * MON")
    expect(page.locator("#cron-preview [data-preview=words]")).to_contain_text("02:30")
    page.locator("#cron").fill("61 * * * *")
    expect(page.locator("#cron-preview [data-preview=error]")).to_be_visible()
