"""A press whose answer htmx does not swap (a 5xx: Redis or the database did not answer) or that gets no answer at all
says so above the page: during a Redis incident "Replay all matching" did nothing visible, as if it had worked.

A real `rebound web` on a Redis of the test's own, stopped after the page is drawn: the 503 is the server's.
"""

import pytest
from playwright.sync_api import expect

from console.processes import embedded_redis
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from tests.factories import LENIENT
from tests.helpers import browser_login
from tests.servers import app_beside, web_server

pytestmark = pytest.mark.browser


@pytest.fixture
def own_redis(tmp_path):
    """An embedded Redis the test may stop and start again on the same socket."""
    place = str(tmp_path / "redis")
    url, process = embedded_redis.start(place)
    state = {"url": url, "process": process, "place": place}
    yield state
    state["process"].terminate()
    state["process"].wait(10)


def replay_all(page) -> None:
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Replay all 1 matching").click()


def test_an_answer_htmx_does_not_swap_is_said_above_the_page(browser, tmp_path, own_redis, migrated_template,
                                                             databases):
    with web_server(tmp_path / "web", own_redis["url"], migrated_template, databases) as server:
        with app_beside(server):  # an open dead letter that ran out of its one try: only its dialog asks
            run, _ = submit(tenants.find("default"), Actor("arrange"), handler="demo.flaky",
                            params={"fail_times": 9, "code": "carrier_down"}, policy={**LENIENT, "max_attempts": 1})
            assert execute(run.id, 0) == "dead"
        page = browser.new_page()
        try:
            browser_login(page, server.url, then="/dlq/?view=list")
            own_redis["process"].terminate()  # Redis goes away with the page open
            own_redis["process"].wait(10)
            replay_all(page)
            said = page.locator("#flashes #not-done")
            expect(said).to_have_text(
                "That did not go through (503): Redis did not answer (it may be down, restarting or paused), so this "
                "did not go through: look at the page again, then try once more when it answers; pages that only read "
                "the database still work meanwhile", timeout=15_000)
            expect(said).to_have_attribute("role", "alert")
            expect(page.locator(".bulk-progress")).to_have_count(0)

            # No answer at all (the network or the console down: the browser's own failure), said in the same place.
            page.route("**/dlq/bulk/replay-matching", lambda route: route.abort("connectionrefused"))
            replay_all(page)
            expect(said).to_have_text("The console did not answer, so that did not go through: check that it is "
                                      "running, then try again.")
            expect(page.locator("#flashes .flash.error")).to_have_count(1)  # replaced, not stacked
            page.unroute("**/dlq/bulk/replay-matching")

            # Redis back on its socket: the same press starts the replay.
            own_redis["url"], own_redis["process"] = embedded_redis.start(own_redis["place"])
            replay_all(page)
            expect(page.locator(".bulk-progress")).to_have_count(1, timeout=15_000)
        finally:
            page.close()


def test_an_action_refused_before_its_view_answers_is_said_above_the_page_and_keeps_the_form(
        browser, tmp_path, own_redis, migrated_template, databases):
    """The whole error page was swapped into the work order's card: a second top bar and nav inside it, the close
    note typed gone (helper 155)."""
    with web_server(tmp_path / "web", own_redis["url"], migrated_template, databases) as server:
        with app_beside(server):
            run, _ = submit(tenants.find("default"), Actor("arrange"), handler="demo.flaky",
                            params={"fail_times": 9, "error": "fatal", "code": "account_closed"}, policy=LENIENT)
            assert execute(run.id, 0) == "dead"
        page = browser.new_page()
        try:
            browser_login(page, server.url, then="/workorders")
            page.locator("table a[href^='/workorders/']").first.click()
            note = page.locator("textarea[name='close-note']")
            note.fill("restarted the billing\u0000 service")
            page.once("dialog", lambda dialog: dialog.accept())
            page.get_by_role("button", name="Close work order").click()
            said = page.locator("#flashes #not-done")
            expect(said).to_contain_text("422 · Invalid input: close-note contains a NUL character", timeout=15_000)
            expect(said).to_have_attribute("role", "alert")
            expect(page.locator("header")).to_have_count(1)  # no second console inside the card
            expect(note).to_have_value("restarted the billing\u0000 service")
        finally:
            page.close()


def test_a_refused_filter_in_a_region_that_refreshes_itself_is_still_said(browser, tmp_path, own_redis,
                                                                           migrated_template, databases):
    """The Runs list refreshes itself every 5 s: a person's refused filter was dropped as if it were that refresh,
    and the list read as matching everything (helper 157)."""
    with web_server(tmp_path / "web", own_redis["url"], migrated_template, databases) as server:
        page = browser.new_page()
        try:
            browser_login(page, server.url, then="/runs")
            page.locator("input[name='q']").fill("walk\u0000err")
            page.locator("input[name='q']").press("Enter")
            expect(page.locator("#flashes #not-done")).to_contain_text(
                "422 · Invalid input: q contains a NUL character", timeout=15_000)
        finally:
            page.close()


def test_a_refusal_that_arrives_after_a_live_refresh_replaced_the_form_is_still_said(browser, tmp_path, own_redis,
                                                                                   migrated_template, databases):
    """A Cancel that waited 10 s on a locked database: the run page's refresh replaced its form meanwhile, and the 503
    reached no listener, so the person was told nothing (helper 162)."""
    with web_server(tmp_path / "web", own_redis["url"], migrated_template, databases) as server:
        with app_beside(server):
            run, _ = submit(tenants.find("default"), Actor("arrange"), handler="demo.flaky",
                            params={"fail_times": 9, "code": "carrier_down"},
                            policy={**LENIENT, "max_attempts": 5, "base_delay_s": 3600, "max_delay_s": 3600})
            assert execute(run.id, 0) == "retry_wait"
        page = browser.new_page()
        held = []
        try:
            browser_login(page, server.url, then=f"/runs/{run.id}")
            page.route(f"**/runs/{run.id}/retry", lambda route: held.append(route))  # answered below, late
            page.once("dialog", lambda dialog: dialog.accept())
            page.get_by_role("button", name="Retry now").click()
            deadline_ms = 10_000
            while not held and deadline_ms > 0:
                page.wait_for_timeout(50)
                deadline_ms -= 50
            assert held, "the press never left the page"
            # The live refresh lands first: the region, and the form in it, are new elements.
            page.evaluate("() => { const region = document.getElementById('run-detail');"
                          " region.replaceWith(region.cloneNode(true)); }")
            held[0].fulfill(status=503, content_type="application/json",
                            body='{"error": "database_unavailable", "detail": "the database did not answer"}')
            said = page.locator("#flashes #not-done")
            expect(said).to_have_text("That did not go through (503): the database did not answer", timeout=15_000)
        finally:
            page.close()
