"""A run's page reads itself again every 2 s: what a person opened or was told stays, in real Chromium."""

import pytest
from playwright.sync_api import expect

from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from tests.factories import LENIENT
from tests.helpers import browser_login

pytestmark = pytest.mark.browser
SLOW_RETRIES = {**LENIENT, "max_attempts": 10, "base_delay_s": 600, "max_delay_s": 600, "multiplier": 1, "jitter": 0}


def refreshed(page, run_id: int, times: int = 2) -> None:
    """Wait for the page's own refresh to read the run `times` times (with a deadline, never a sleep)."""
    for _ in range(times):
        with page.expect_response(lambda r: r.url.endswith(f"/runs/{run_id}") and r.request.method == "GET"
                                  and r.request.headers.get("hx-request") == "true", timeout=10_000):
            pass


def test_an_open_traceback_and_an_actions_answer_outlive_the_refresh(page, live_server, live_app):
    """The refresh swapped in a copy every 2 s: the traceback being read folded itself, and "Retried run #…" was
    gone before it could be read (helper 117)."""
    run, _ = submit(tenants.find("default"), Actor("arrange"), handler="demo.flaky", policy=SLOW_RETRIES,
                    params={"fail_times": 50, "code": "slow_dep", "message": "the ledger is slow"})
    assert execute(run.id, 0) == "retry_wait"
    browser_login(page, live_server.url)
    page.goto(f"{live_server.url}/runs/{run.id}")
    expect(page.get_by_text("live, every 2 s")).to_be_visible()
    page.locator("summary", has_text="attempt 1").click()
    traceback = page.locator("details", has=page.locator("summary", has_text="attempt 1"))
    refreshed(page, run.id)
    expect(traceback).to_have_attribute("open", "")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Retry now").click()
    notice = page.get_by_role("status").filter(has_text=f"Retried run #{run.id}: it is now pending.")
    expect(notice).to_be_visible()
    if traceback.get_attribute("open") is None:  # the answer's own copy of the run, which the person opens again
        page.locator("summary", has_text="attempt 1").click()
    refreshed(page, run.id)
    expect(notice).to_be_visible()
    # The run moves on (its second attempt fails): the new copy is swapped in, the open traceback stays open.
    assert execute(run.id, 1) == "retry_wait"
    expect(page.locator("summary", has_text="attempt 2")).to_be_visible()
    expect(traceback).to_have_attribute("open", "")
    expect(notice).to_be_visible()
