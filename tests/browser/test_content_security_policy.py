"""The console's scripts work under the Content-Security-Policy: what moved from inline handlers into
static/console.js still works, without one violation.

Every page loading without a violation is the page walk's to check (tests/browser/test_page_walk.py records them
as problems); this test drives the interactions.
"""

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import DeadLetter, Run, WorkOrder
from console.services.actor import Actor
from console.services.engine import transitions
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants, users
from console.services.policies import versions as policies
from console.services.recovery import params_fix
from console.services.scheduling import tasks
from console.services.system import demo
from tests.factories import Saga, three_steps
from tests.helpers import PASSWORD, browser_login

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")
# Records each violation (and its directive, source and sample) across navigations.
LISTEN = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.cspViolation(`${event.violatedDirective} blocked ${event.blockedURI || "inline"} at ${event.sourceFile}:` +
                      `${event.lineNumber}:${event.columnNumber} ${event.sample}`);
});
"""


def dead_run(message: str, code: str) -> int:
    clock = FrozenClock(utcnow() - timedelta(minutes=5))
    run, _ = submit(tenants.find("default"), ARRANGE, handler="demo.flaky", policy="browser",
                    params={"fail_times": 9, "code": code, "message": message})
    for attempt in range(3):
        execute(run.id, attempt, clock=clock)
        clock.advance(5)
    return run.id


@pytest.fixture
def arranged(live_app):
    """Demo data plus one of everything a page lists: dead letters, a work order, a request, a workflow, a task."""
    demo.seed()
    policies.save("browser", {"max_attempts": 3, "base_delay_s": 1, "multiplier": 2, "jitter": 0,
                              "breaker": {"failure_threshold": 100}}, ARRANGE)
    dead = [dead_run(f"carrier api down for parcel {n}", "carrier_down") for n in (11, 12, 13)]
    task = tasks.register(tenants.find("default"), {"name": "nightly-export", "handler": "demo.noop",
                                                    "cron": "30 2 * * *"}, ARRANGE)
    running, _ = submit(tenants.find("default"), ARRANGE, handler="demo.noop", policy="browser")
    transitions.move(running, "running", utcnow(), attempt=1, progress=40, progress_message="40 of 100 rows")
    db.session.commit()
    letter = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == dead[0])).scalar_one()
    olga, _ = users.create("olga", "operator", PASSWORD, ARRANGE)
    approval = params_fix.request_fix(letter.id, {"fail_times": 0}, "the carrier is back", Actor("olga", olga.id))
    workflow = Saga(FrozenClock(utcnow())).submit(three_steps())
    order = db.session.execute(select(WorkOrder.id)).scalars().first()
    return {"run": dead[0], "running": running.id, "task": task.id, "letter": letter.id, "approval": approval.id,
            "workflow": workflow, "order": order}


def test_the_console_scripts_work_under_the_policy_without_a_violation(page, live_server, arranged, screenshot):
    base = live_server.url
    violations, errors = [], []
    page.expose_binding("cspViolation", lambda source, text: violations.append(f"{page.url}: {text}"))
    page.add_init_script(LISTEN)
    page.on("console", lambda message: errors.append(f"{page.url}: {message.text}")
            if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(f"{page.url}: script error {error}"))

    response = page.goto(base + "/login")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    browser_login(page, base)
    page.wait_for_url("**/overview")
    page.wait_for_load_state("networkidle")
    page.goto(f"{base}/runs/{arranged['running']}")
    expect(page.locator("progress.progress.big")).to_have_attribute("value", "40")
    screenshot("csp-run-progress")

    # What moved from inline handlers into static/console.js still works.
    page.goto(f"{base}/dlq/")
    group = page.locator("tbody.group", has_text="carrier api down")
    group.locator("button.expand").click()
    expect(group.locator("tr.group-entries")).to_contain_text("Newest entries of this group")
    expect(group.locator("button.expand")).to_have_attribute("aria-expanded", "true")
    screenshot("csp-dlq-expanded")
    group.get_by_role("button", name="Hide").click()
    expect(group.locator("tr.group-entries")).to_be_hidden()
    expect(group.locator("button.expand")).to_have_attribute("aria-expanded", "false")

    page.locator("#dlq-status").select_option("open")  # a default: left out of the address, as before
    page.get_by_role("radio", name="Entries").check()
    expect(page).to_have_url(re.compile(r"/dlq/\?view=list$"))
    page.get_by_label("select every row on this page").check()
    boxes = page.locator("input[form=dlq-bulk][name=id]")
    expect(boxes.first).to_be_checked()
    assert all(boxes.nth(n).is_checked() for n in range(boxes.count()))

    page.goto(f"{base}/tasks/{arranged['task']}")
    page.once("dialog", lambda dialog: dialog.dismiss())  # "Delete task nightly-export? …" answered no
    page.get_by_role("button", name="Delete").click()
    page.wait_for_load_state("networkidle")
    expect(page).to_have_url(f"{base}/tasks/{arranged['task']}")
    assert db.session.get(Run, arranged["run"]) is not None and tasks.get(arranged["task"]) is not None

    page.goto(f"{base}/approvals/all")
    page.locator("#approvals-status").select_option("pending")
    expect(page).to_have_url(re.compile(r"status=pending"))

    assert violations == [], "\n".join(violations)
    assert errors == []
