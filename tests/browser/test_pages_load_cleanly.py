"""Every page of the console loads in Chromium without a failed request, a console error or a script error."""

import pytest

from tests.helpers import browser_login

pytestmark = pytest.mark.browser
PAGES = ["/overview", "/tasks", "/tasks/new", "/runs", "/runs/timeline", "/runs/workflows", "/runs/workflows/new",
         "/dlq/", "/workorders/", "/approvals", "/approvals/mine", "/approvals/all", "/policies/", "/policies/new",
         "/breakers/", "/queues/", "/audit/", "/admin/users", "/admin/tokens", "/admin/channels", "/admin/alert-rules",
         "/admin/settings", "/admin/tenants", "/tasks/forecast", "/tasks/forecast?horizon=7d"]


def test_every_page_loads_without_a_failed_request_or_an_error(page, live_server):
    problems = []

    def failed_response(response):
        if response.status >= 400:
            problems.append(f"{page.url}: {response.status} for {response.url}")

    def console_error(message):
        # What the browser fetches by itself (the tab's icon) shows only here, not as a page's response.
        if message.type == "error":
            problems.append(f"{page.url}: {message.text}")

    page.on("response", failed_response)
    page.on("console", console_error)
    page.on("requestfailed", lambda request: problems.append(f"{page.url}: {request.url} failed"))
    page.on("pageerror", lambda error: problems.append(f"{page.url}: script error {error}"))
    browser_login(page, live_server.url)
    page.wait_for_url("**/overview")
    # Leaving before the overview's own requests end would abort them (its tab icon), which reads as a failure.
    page.wait_for_load_state("networkidle")
    for path in PAGES:
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
    assert problems == []
