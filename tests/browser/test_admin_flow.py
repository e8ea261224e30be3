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
    expect(page.get_by_text(re.compile(r"Created nina \(viewer\)\. Their password, shown once: \S+"))).to_be_visible()

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
