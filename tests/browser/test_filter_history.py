"""Filters and the browser's history: one Enter is one entry, and Back shows boxes that say what the page shows."""

import re

import pytest
from playwright.sync_api import expect

from tests.factories import make_tenant
from tests.helpers import browser_login

pytestmark = pytest.mark.browser


def test_one_enter_in_a_runs_filter_box_is_one_step_back(page, live_server):
    """Enter fired the form's change and its submit: two requests and two history entries, so the first Back
    seemed to do nothing (helper 166)."""
    browser_login(page, live_server.url)
    page.goto(f"{live_server.url}/runs?before=999999")  # an older page: its live refresh did not hide the second
    before = page.evaluate("history.length")
    page.locator("#q").fill("abc")
    page.locator("#q").press("Enter")
    expect(page).to_have_url(re.compile(r"q=abc"))
    page.wait_for_load_state("networkidle")
    assert page.evaluate("history.length") == before + 1


def test_back_to_a_plain_filter_form_shows_the_boxes_of_its_address(page, live_server, live_app):
    """After Back the Tenant box kept 'acme' (the browser puts back what a form held) above every tenant's figures
    (helper 166)."""
    make_tenant("acme")
    browser_login(page, live_server.url)
    page.goto(f"{live_server.url}/reports?period=7d")
    page.locator("#tenant").select_option("acme")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"tenant=acme"))
    page.go_back()
    expect(page).to_have_url(re.compile(r"/reports\?period=7d$"))
    page.wait_for_load_state("load")
    expect(page.locator("#tenant")).to_have_value("")
