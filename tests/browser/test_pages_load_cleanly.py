"""Every page of the console loads in Chromium without a failed request, a console error or a script error."""

import pytest

from tests.browser.test_admin_flow import login

pytestmark = pytest.mark.browser
PAGES = ["/overview", "/tasks", "/tasks/new", "/runs", "/runs/timeline", "/dlq/", "/workorders/", "/policies/",
         "/policies/new", "/breakers/", "/queues/", "/audit/", "/admin/users", "/admin/tokens", "/admin/channels",
         "/admin/alert-rules"]


def test_every_page_loads_without_a_failed_request_or_an_error(page, live_server):
    problems = []
    page.on("response", lambda response: response.status >= 400 and problems.append(
        f"{page.url}: {response.status} for {response.url}"))
    page.on("requestfailed", lambda request: problems.append(f"{page.url}: {request.url} failed"))
    page.on("pageerror", lambda error: problems.append(f"{page.url}: script error {error}"))
    # What the browser fetches by itself (the tab's icon) shows only here, not as a page's response.
    page.on("console", lambda message: message.type == "error" and problems.append(f"{page.url}: {message.text}"))
    login(page, live_server.url)
    page.wait_for_url("**/overview")
    for path in PAGES:
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
    assert problems == []
