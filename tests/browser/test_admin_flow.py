"""An admin's first minutes, in real Chromium against a real server."""

import re

import pytest
from playwright.sync_api import expect

from tests.helpers import PASSWORD, browser_login

pytestmark = pytest.mark.browser


def test_admin_logs_in_sees_overview_changes_a_role_and_finds_the_audit_row(page, live_server, screenshot):
    base = live_server.url
    browser_login(page, base, password="wrong-password")
    expect(page.get_by_text("Wrong username or password.")).to_be_visible()

    browser_login(page, base)
    expect(page).to_have_url(f"{base}/overview")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.get_by_text("Dead letters open")).to_be_visible()
    expect(page.get_by_text("No open dead letters.")).to_be_visible()
    screenshot("overview-empty")

    page.get_by_role("link", name="Admin").click()
    page.get_by_label("Username").fill("nina")
    page.locator("#role").select_option("viewer")
    page.get_by_role("button", name="Create user").click()
    expect(page.get_by_text("Created nina (viewer).")).to_be_visible()
    expect(page.locator("#new-password")).to_have_text(re.compile(r"\S{12,}"))

    row = page.locator("tr", has_text="nina")
    row.get_by_label("role of nina").select_option("operator")
    row.get_by_role("button", name="Save").click()
    expect(row.get_by_text("saved")).to_be_visible()  # swapped in place by htmx
    screenshot("admin-users")

    page.get_by_role("link", name="Audit").click()
    entry = page.locator("tr", has_text="user.update")
    expect(entry).to_contain_text('"role": "viewer"')
    expect(entry).to_contain_text('"role": "operator"')
    expect(entry).to_contain_text("admin")
    page.get_by_role("button", name="Verify hash chain").click()
    expect(page.get_by_text(re.compile(r"Hash chain intact: \d+ rows verified"))).to_be_visible()
    screenshot("audit")


def test_viewer_sees_no_admin_link_and_is_refused_the_page(page, live_server):
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "console.cli", "create-user", "vic", "--role", "viewer",
                    "--password", PASSWORD], env=live_server.env, check=True, capture_output=True)
    browser_login(page, live_server.url, "vic")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.get_by_role("link", name="Admin")).to_have_count(0)
    response = page.goto(f"{live_server.url}/admin/users")
    assert response.status == 403
    expect(page.get_by_text("your role (viewer) may not administer (people, tokens, tenants, channels)")
           ).to_be_visible()


def test_an_admin_resets_a_forgotten_password_and_its_person_chooses_their_own(page, live_server, browser,
                                                                               screenshot):
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "console.cli", "create-user", "nina", "--role", "operator",
                    "--password", PASSWORD], env=live_server.env, check=True, capture_output=True)
    browser_login(page, live_server.url, then="/admin/users")
    row = page.locator("tr", has_text="nina")
    # On a phone the status rides under the name: its column sat under the row's pinned buttons (helper 156).
    page.set_viewport_size({"width": 390, "height": 844})
    expect(row.locator(".phone-status .badge")).to_be_visible()
    expect(row.locator("td.people-status")).to_be_hidden()
    page.set_viewport_size({"width": 1280, "height": 800})
    expect(row.locator(".phone-status")).to_be_hidden()
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Reset password").click()
    expect(page.get_by_text("Reset nina's password; their sessions have ended")).to_be_visible()
    temporary = page.locator("#new-password").inner_text().strip()
    expect(page.locator("tr", has_text="nina")).to_contain_text("to be changed at their next login")
    screenshot("admin-password-reset")

    nina = browser.new_context().new_page()
    try:
        browser_login(nina, live_server.url, "nina", temporary)
        expect(nina).to_have_url(f"{live_server.url}/account/")
        expect(nina.get_by_text("An admin reset your password")).to_be_visible()
        nina.get_by_label("Current password").fill(temporary)
        nina.get_by_label("New password", exact=True).fill("a-fresh-river-of-lanterns")
        nina.get_by_label("New password again").fill("a-fresh-river-of-lanterns")
        nina.get_by_role("button", name="Change password").click()
        expect(nina.get_by_text("Your password is changed")).to_be_visible()
        expect(nina.get_by_text("An admin reset your password")).to_have_count(0)
        nina.get_by_role("link", name="DLQ").click()
        expect(nina).to_have_url(f"{live_server.url}/dlq/")
    finally:
        nina.context.close()
