"""A press whose answer htmx does not swap (a 5xx: Redis or the database did not answer) or that gets no answer at all
says so above the page: during a Redis incident "Replay all matching" did nothing visible, as if it had worked."""

import pytest
from playwright.sync_api import expect

from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from tests.factories import LENIENT
from tests.helpers import browser_login

pytestmark = pytest.mark.browser
# The server's own 503 page for an action that needs Redis (console/safety.py), as the browser receives it.
REDIS_503 = ('<!doctype html><html><body><main id="content"><div class="panel error-panel"><h1>503 · Unavailable</h1>'
             "<p>Redis did not answer (it may be down, restarting or paused), so this was not done: try again once it "
             "answers; pages that only read the database still work meanwhile</p></div></main></body></html>")


@pytest.fixture
def letter(live_app):
    """An open dead letter that ran out of its one try, so "Replay all 1 matching" asks only its dialog."""
    run, _ = submit(tenants.find("default"), Actor("arrange"), handler="demo.flaky",
                    params={"fail_times": 9, "code": "carrier_down"}, policy={**LENIENT, "max_attempts": 1})
    assert execute(run.id, 0) == "dead"


def replay_all(page) -> None:
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Replay all 1 matching").click()


def test_an_answer_htmx_does_not_swap_is_said_above_the_page(page, live_server, letter):
    browser_login(page, live_server.url)
    page.goto(f"{live_server.url}/dlq/?view=list")
    page.route("**/dlq/bulk/replay-matching", lambda route: route.fulfill(
        status=503, content_type="text/html; charset=utf-8", body=REDIS_503, headers={"Retry-After": "5"}))
    replay_all(page)
    said = page.locator("#flashes #not-done")
    expect(said).to_have_text("That did not go through (503): Redis did not answer (it may be down, restarting or "
                              "paused), so this was not done: try again once it answers; pages that only read the "
                              "database still work meanwhile")
    expect(said).to_have_attribute("role", "alert")
    expect(page.locator(".bulk-progress")).to_have_count(0)

    # No answer at all (the console stopped): said too, in the same place, not stacked.
    page.unroute("**/dlq/bulk/replay-matching")
    page.route("**/dlq/bulk/replay-matching", lambda route: route.abort("connectionrefused"))
    replay_all(page)
    expect(said).to_have_text("The console did not answer, so that did not go through: check that it is running, "
                              "then try again.")
    expect(page.locator("#flashes .flash.error")).to_have_count(1)

    # Once it answers, the same press starts the replay.
    page.unroute("**/dlq/bulk/replay-matching")
    replay_all(page)
    expect(page.locator(".bulk-progress")).to_have_count(1)
