"""An operator creates a quota class in real Chromium, sets it on a template; the task follows, a third run waits."""

import pytest
from playwright.sync_api import expect
from sqlalchemy import text

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants, users
from console.services.scheduling import tasks, templates
from tests.helpers import PASSWORD, browser_login

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")


def test_an_operator_creates_a_class_puts_it_on_a_template_and_the_task_follows(page, live_server, live_app,
                                                                                 screenshot):
    templates.save("nightly-batch", {"mutex_key": "ledger"}, ARRANGE, description="ledger jobs at night")
    export = tasks.register(tenants.find("default"), {"name": "nightly-export", "handler": "demo.noop",
                                                      "cron": "30 2 * * *", "template": "nightly-batch"}, ARRANGE)
    users.create("olga", "operator", PASSWORD, ARRANGE)

    base = live_server.url
    page.set_viewport_size({"width": 1440, "height": 900})
    browser_login(page, base, "olga", then="/tasks/templates/")
    page.get_by_role("link", name="Quota classes").click()
    page.get_by_label("Name").fill("heavy-etl")
    page.get_by_label("Max running").fill("2")
    page.get_by_label("Description").fill("nightly ETL: two at a time across tenants")
    page.get_by_role("button", name="Create quota class").click()
    expect(page.locator(".flash.success")).to_contain_text("Created quota class heavy-etl")
    expect(page.locator("tr[data-class='heavy-etl']")).to_be_visible()
    screenshot("quota-classes")

    page.goto(f"{base}/tasks/templates/nightly-batch")
    page.get_by_label("Quota class").select_option("heavy-etl")
    preview = page.locator("#template-preview")
    expect(preview.locator("tr[data-task='nightly-export']")).to_contain_text("quota_class")
    page.get_by_role("button", name="Save as version 2").click()
    expect(page.locator(".flash.success")).to_contain_text("Saved nightly-batch as version 2; it changed 1 task(s)")
    screenshot("quota-class-template")

    page.goto(f"{base}/tasks/{export.id}")
    expect(page.locator("[data-effective='quota_class']")).to_have_text("heavy-etl")
    expect(page.locator(".rule-source[data-rule='quota_class']")).to_contain_text("from template nightly-batch")
    screenshot("quota-class-task-page")

    # Two runs of the class running: a third waits, and its page says why.
    default = tenants.find("default")
    others = [tasks.register(default, {"name": name, "handler": "demo.noop", "template": "nightly-batch"}, ARRANGE)
              for name in ("nightly-b", "nightly-c")]
    held = [submit(default, ARRANGE, task=task)[0].id for task in (export, *others)]
    db.session.execute(text("UPDATE runs SET status = 'running', attempt = 1 WHERE id IN (:a, :b)"),
                       {"a": held[0], "b": held[1]})
    db.session.commit()
    assert execute(held[2], 0, clock=FrozenClock(utcnow())) == "deferred:quota_class"
    page.goto(f"{base}/runs/{held[2]}")
    expect(page.locator("body")).to_contain_text(
        "quota class heavy-etl: 2 of its 2 running slots in use (tasks nightly-b, nightly-export)")
    screenshot("quota-class-run-waits")
