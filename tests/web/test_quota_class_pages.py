"""Tasks → Quota classes: the list, create, edit, delete (refused while in use); the task page shows the rule."""

import re

from sqlalchemy import text

from console.extensions import db
from console.models import AuditEntry
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.scheduling import quota_classes, tasks, templates
from tests.factories import make_tenant

PAGE = "/tasks/quota-classes/"


def row_of(page: str, name: str) -> str:
    return re.search(rf'<tr id="class-{name}" data-class="{name}">(.*?)</tr>', page, re.S).group(1)


def test_an_operator_creates_edits_and_deletes_a_class(client, auth, app):
    auth.as_role("operator")
    created = client.post(PAGE, data={"name": "heavy-etl", "max_running": "2", "description": "nightly ETL",
                                      "csrf_token": auth.csrf(PAGE)})
    assert created.status_code == 303
    page = client.get(PAGE).get_data(as_text=True)
    assert "Created quota class heavy-etl" in page and 'value="2"' in row_of(page, "heavy-etl")

    edited = client.post(f"{PAGE}heavy-etl", data={"max_running": "3", "description": "nightly ETL",
                                                   "csrf_token": auth.csrf(PAGE)})
    assert edited.status_code == 303 and quota_classes.get("heavy-etl").max_running == 3

    tasks.register(tenants.find("default"), {"name": "export", "handler": "demo.noop", "cron": "0 2 * * *",
                                             "template": None, "quota_class": "heavy-etl"}, Actor("test"))
    refused = client.post(f"{PAGE}heavy-etl/delete", data={"csrf_token": auth.csrf(PAGE)}, follow_redirects=True)
    assert "Not deleted: quota class &#39;heavy-etl&#39; is used by task default/export" in refused.get_data(
        as_text=True)
    assert quota_classes.find("heavy-etl") is not None
    assert [e.action for e in AuditEntry.query.filter_by(target_type="quota_class")] == [
        "quota_class.create", "quota_class.update"]


def test_bad_input_redraws_the_form_with_the_message_and_writes_nothing(client, auth, app):
    auth.as_role("operator")
    response = client.post(PAGE, data={"name": "Heavy ETL", "max_running": "2", "csrf_token": auth.csrf(PAGE)})
    assert response.status_code == 422
    assert "quota class names are 1-64 lowercase letters" in response.get_data(as_text=True)
    for bad in ("0", "abc", "", "99999999999999999999"):  # one sentence for each, not WTForms' two
        response = client.post(PAGE, data={"name": "heavy", "max_running": bad, "csrf_token": auth.csrf(PAGE)})
        text = response.get_data(as_text=True)
        assert response.status_code == 422 and "a whole number from 1 to" in text, bad
        assert "Not a valid integer" not in text and "Number must be" not in text
    assert quota_classes.all_classes() == []


def test_viewers_and_tenant_limited_operators_read_but_do_not_change(client, auth, app):
    quota_classes.create("heavy-etl", 2, Actor("test"))
    auth.as_role("viewer")
    page = client.get(PAGE).get_data(as_text=True)
    assert "heavy-etl" in page and "New quota class" not in page
    assert client.post(PAGE, data={"name": "x", "max_running": "1", "csrf_token": auth.csrf()}).status_code == 403
    acme = make_tenant("acme")
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.login(auth.make_user("acme-ops", "operator", tenant=acme).username)
    assert "New quota class" not in client.get(PAGE).get_data(as_text=True)
    assert client.post(f"{PAGE}heavy-etl", data={"max_running": "9", "csrf_token": auth.csrf()}).status_code == 403
    assert quota_classes.get("heavy-etl").max_running == 2


def test_the_task_page_shows_the_class_and_whether_it_comes_from_the_template(client, auth, app):
    quota_classes.create("heavy-etl", 2, Actor("test"))
    templates.save("nightly", {"quota_class": "heavy-etl"}, Actor("test"))
    task = tasks.register(tenants.find("default"), {"name": "export", "handler": "demo.noop", "cron": "0 2 * * *",
                                                    "template": "nightly"}, Actor("test"))
    auth.as_role("viewer")
    page = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert 'data-effective="quota_class">heavy-etl' in page
    assert re.search(r'data-rule="quota_class" data-source="template"[^>]*>from template nightly', page)
    listing = client.get("/tasks/templates/").get_data(as_text=True)
    assert "#class-heavy-etl" in listing


def test_a_run_held_back_by_its_class_says_so_on_its_page(client, auth, app, clock):
    quota_classes.create("heavy-etl", 1, Actor("test"))
    default = tenants.find("default")
    made = [tasks.register(default, {"name": name, "handler": "demo.noop", "template": None,
                                     "quota_class": "heavy-etl"}, Actor("test")) for name in ("nightly-a", "nightly-b")]
    first, second = (submit(default, Actor("test"), task=task)[0].id for task in made)
    db.session.execute(text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": first})
    db.session.commit()
    assert execute(second, 0, clock=clock) == "deferred:quota_class"
    auth.as_role("viewer")
    page = client.get(f"/runs/{second}").get_data(as_text=True)
    assert "quota class heavy-etl: 1 of its 1 running slot in use (tasks nightly-a)" in page


def test_the_forecast_page_lists_minutes_a_class_runs_beyond_its_max(client, auth, app):
    quota_classes.create("heavy-etl", 1, Actor("test"))
    for name in ("nightly-a", "nightly-b"):
        tasks.register(tenants.find("default"), {"name": name, "handler": "demo.noop", "cron": "*/30 * * * *",
                                                 "template": None, "quota_class": "heavy-etl"}, Actor("test"))
    auth.as_role("viewer")
    page = client.get("/tasks/forecast").get_data(as_text=True)
    table = re.search(r'<table class="class-overflows">(.*?)</table>', page, re.S).group(1)
    assert "<code>heavy-etl</code>" in table and "nightly-a, nightly-b" in table
