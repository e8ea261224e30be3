"""A button pressed twice before its page answers does its work once, in real Chromium."""

import pytest
from playwright.sync_api import expect
from sqlalchemy import func, select

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import Run
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.people import tenants, users
from console.services.recovery import runbook_runner, runbooks
from console.services.scheduling import tasks
from tests.factories import BROKEN, LENIENT, Runs
from tests.helpers import PASSWORD, browser_login, wait_for

pytestmark = pytest.mark.browser


def runs_of(task_id: int) -> int:
    db.session.commit()
    return db.session.scalar(select(func.count()).select_from(Run).where(Run.task_id == task_id))


def test_run_now_pressed_twice_before_its_answer_makes_one_run(page, live_server, live_app):
    task = tasks.register(tenants.find("default"), {"name": "payroll", "handler": "demo.noop", "cron": "0 3 * * *"},
                          Actor("arrange"))
    browser_login(page, live_server.url)
    page.goto(f"{live_server.url}/tasks/{task.id}")
    held, released = [], []  # the form's requests, held until both presses are in: a slow answer on any machine

    def hold(route):
        held.append(route)
        if released:
            route.continue_()
    page.route("**/trigger", hold)
    box = page.get_by_role("button", name="Run now").bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    wait_for(lambda: held or page.wait_for_timeout(10), what="the first press's request")
    page.mouse.click(x, y)
    released.append(True)
    for route in list(held):
        route.continue_()
    expect(page.get_by_text("Queued run #")).to_be_visible()  # the last press's answer: every request was made
    assert len(held) == 1 and runs_of(task.id) == 1
    # The page the press led to is a new page: a person's second, deliberate Run now makes a second run.
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_text("Queued run #")).to_have_count(1)
    assert runs_of(task.id) == 2


def test_a_double_click_on_a_button_that_asks_first_asks_once(page, live_server, live_app):
    """"Run this for real" double-clicked asked its question twice, though it sent once (helper 164)."""
    run_id = Runs().submit("demo.flaky", BROKEN, policy=LENIENT)
    assert execute(run_id, 0, clock=FrozenClock(utcnow())) == "dead"
    user = users.create("olga", "operator", PASSWORD, Actor("arrange"))[0]
    execution = runbooks.start("replay_dead_letters", {"code": BROKEN["code"]}, Actor("olga", user.id), scope=None,
                               dry_run=True, enqueue=False)
    runbook_runner.execute(execution.id)
    browser_login(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/runbooks/executions/{execution.id}")
    asked, held = [], []
    page.route("**/runbooks/**", lambda route: held.append(route) if route.request.method == "POST" else
               route.continue_())

    def answer(dialog):
        asked.append(dialog.message)
        dialog.accept()
    page.on("dialog", answer)
    page.get_by_role("button", name="Run this for real").dblclick()
    wait_for(lambda: held or page.wait_for_timeout(10), what="the press's request")  # Playwright answers meanwhile
    page.wait_for_timeout(300)  # a second question would have come by now
    assert len(asked) == 1 and len(held) == 1, asked
    for route in held:
        route.continue_()
