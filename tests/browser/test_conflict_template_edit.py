"""An operator edits a conflict template in real Chromium: sees the tasks it changes, saves, finds version 2."""

import pytest
from playwright.sync_api import expect

from console.services.actor import Actor
from console.services.people import tenants, users
from console.services.scheduling import tasks, templates
from tests.helpers import PASSWORD, browser_login

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")


def test_an_operator_sees_the_blast_radius_saves_and_the_task_follows(page, live_server, live_app, screenshot):
    templates.save("nightly-batch", {"mutex_key": "ledger", "concurrency_policy": "allow"}, ARRANGE,
                   description="ledger jobs at night")
    default = tenants.find("default")
    export = tasks.register(default, {"name": "nightly-export", "handler": "demo.noop", "cron": "30 2 * * *",
                                      "template": "nightly-batch"}, ARRANGE)
    tasks.register(default, {"name": "ledger-close", "handler": "demo.noop", "cron": "0 3 * * *",
                             "template": "nightly-batch", "concurrency_policy": "replace"}, ARRANGE)
    users.create("olga", "operator", PASSWORD, ARRANGE)

    base = live_server.url
    page.set_viewport_size({"width": 1440, "height": 900})
    browser_login(page, base, "olga", then="/tasks")
    page.get_by_role("link", name="Conflict templates").click()
    page.get_by_role("link", name="nightly-batch").click()
    expect(page.locator("#template-preview")).to_contain_text("No task changes")
    page.wait_for_load_state()  # the server-rendered preview shows before htmx listens; a change sent earlier is lost

    page.get_by_label("Concurrency policy").select_option("forbid")
    preview = page.locator("#template-preview")
    expect(preview.locator("[data-changed]")).to_have_attribute("data-changed", "1")
    # Only the task that inherits the rule changes; the one that sets it itself is not listed.
    expect(preview.locator("tr[data-task='nightly-export']")).to_contain_text("concurrency_policy: allow → forbid")
    expect(preview.locator("tr[data-task='ledger-close']")).to_have_count(0)
    screenshot("template-edit-preview")

    page.get_by_role("button", name="Save as version 2").click()
    expect(page.locator(".flash.success")).to_contain_text("Saved nightly-batch as version 2; it changed 1 task(s)")
    latest = page.locator("table.history tr[data-version='2']")
    expect(latest).to_contain_text("olga")
    expect(latest).to_contain_text("concurrency_policy: allow → forbid")
    screenshot("template-history")

    page.goto(f"{base}/tasks/{export.id}")
    expect(page.locator("[data-effective='concurrency_policy']")).to_have_text("forbid")
    expect(page.locator(".rule-source[data-rule='concurrency_policy']")).to_contain_text("from template nightly-batch")
    screenshot("template-task-page")
