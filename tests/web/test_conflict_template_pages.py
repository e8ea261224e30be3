"""Tasks → Conflict templates: list, edit with the tasks a save changes, history, delete; who may do what."""

import re

import pytest

from console.extensions import db
from console.models import Task
from console.services.actor import Actor
from console.services.people import tenants
from console.services.scheduling import tasks, templates
from tests.factories import make_tenant

# The `nightly` template as its edit form posts it.
NIGHTLY = {"description": "ledger jobs", "mutex_key": "ledger", "concurrency_policy": "allow", "window": "",
           "misfire_grace_s": "300", "sla": ""}


def make_task(name: str, tenant: str = "default", **fields) -> Task:
    return tasks.register(tenants.find(tenant), {"name": name, "handler": "demo.noop", "cron": "0 3 * * *",
                                                 "template": "nightly", **fields}, Actor("test"))


def post_form(client, auth, path: str, **changes):
    return client.post(path, data={**NIGHTLY, **changes, "csrf_token": auth.csrf("/tasks/templates/")})


def arrange():
    templates.save("nightly", {"mutex_key": "ledger"}, Actor("test"), description="ledger jobs")


def test_the_list_shows_each_template_with_its_rules_and_task_count(client, auth, app):
    arrange()
    make_task("export")
    make_task("close")
    auth.as_role("viewer")
    page = client.get("/tasks/templates/").get_data(as_text=True)
    row = re.search(r'<tr data-template="nightly">(.*?)</tr>', page, re.S).group(1)
    assert "v1" in row and "ledger" in row and 'data-tasks="2"' in row
    assert "New template" not in page  # a viewer reads only


def test_the_edit_page_previews_the_tasks_a_change_rewrites(client, auth):
    arrange()
    make_task("export")
    make_task("close", concurrency_policy="replace")
    auth.as_role("operator")
    csrf = auth.csrf("/tasks/templates/")
    response = client.post("/tasks/templates/preview?template=nightly", headers={"HX-Request": "true"},
                           data={**NIGHTLY, "concurrency_policy": "forbid", "csrf_token": csrf})
    fragment = response.get_data(as_text=True)
    assert response.status_code == 200 and 'data-changed="1"' in fragment
    assert 'data-task="export"' in fragment and 'data-task="close"' not in fragment
    bad = client.post("/tasks/templates/preview?template=nightly",
                      data={**NIGHTLY, "window": "{", "csrf_token": auth.csrf("/tasks/templates/")})
    assert "window is not valid JSON" in bad.get_data(as_text=True)
    assert templates.get("nightly").current_version == 1  # a preview saves nothing


def test_saving_adds_a_version_rewrites_the_task_and_shows_in_history(client, auth):
    arrange()
    task = make_task("export")
    auth.as_role("operator", "olga")
    response = post_form(client, auth, "/tasks/templates/nightly", concurrency_policy="forbid", base_version="1")
    assert response.status_code == 303 and response.headers["Location"] == "/tasks/templates/nightly"
    db.session.expire_all()
    assert db.session.get(Task, task.id).concurrency_policy == "forbid"
    page = client.get("/tasks/templates/nightly").get_data(as_text=True)
    assert "Saved nightly as version 2; it changed 1 task(s)" in page
    history = page[page.index('id="history"'):]
    assert re.search(r'data-version="2">.*?olga.*?concurrency_policy</span>: <span class="was">allow</span> → '
                     r'<span class="now">forbid</span>', history, re.S)
    shown = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert 'data-effective="concurrency_policy">forbid<' in shown and "from template nightly" in shown
    stale = post_form(client, auth, "/tasks/templates/nightly", concurrency_policy="replace", base_version="1")
    assert stale.status_code == 409 and templates.get("nightly").current_version == 2
    page = stale.get_data(as_text=True)
    assert ("olga saved version 2 while you edited version 1; see what they changed under Version history and which "
            "tasks this save changes now, then save again.") in page
    assert re.search(r'name="base_version" type="hidden" value="2"', page) and "Save as version 3" in page
    assert post_form(client, auth, "/tasks/templates/nightly", concurrency_policy="replace",
                     base_version="2").status_code == 303
    assert templates.get("nightly").current_version == 3


def test_a_tampered_version_field_is_422_and_saves_nothing(client, auth):
    arrange()
    auth.as_role("operator")
    for value in ("x", "0", "99999999999"):
        response = post_form(client, auth, "/tasks/templates/nightly", concurrency_policy="forbid", base_version=value)
        assert response.status_code == 422
        assert "the page&#39;s version field was changed; reload the page" in response.get_data(as_text=True)
    assert templates.get("nightly").current_version == 1


@pytest.mark.parametrize("grace", ["soon", "9" * 5000])  # more digits than int() reads was a 500
def test_bad_rules_are_shown_under_their_field_and_save_nothing(client, auth, grace):
    arrange()
    auth.as_role("operator")
    response = post_form(client, auth, "/tasks/templates/nightly", misfire_grace_s=grace)
    assert response.status_code == 422
    assert "misfire_grace_s must be a whole number of seconds" in response.get_data(as_text=True)
    assert templates.get("nightly").current_version == 1


def test_every_bad_field_of_a_new_template_is_marked_at_once(client, auth):
    """Only the first refusal was said: fixing it showed the next, then the next (four saves for four typos)."""
    auth.as_role("operator")
    response = post_form(client, auth, "/tasks/templates/new", name="Nightly Batch!", mutex_key="k" * 5000,
                         misfire_grace_s="-1", sla='{"deadline_s": 1e400}', window="{not json")
    page = response.get_data(as_text=True)
    assert response.status_code == 422
    assert "Nothing was saved: fix the 5 fields marked below." in page, page
    for said in ("template names are 1-64 lowercase letters", "mutex_key is a string of 1-120 characters",
                 "window is not valid JSON", "misfire_grace_s must be a whole number of seconds",
                 "sla: the number at $.deadline_s is not finite"):
        assert said in page
    assert templates.find("nightly-batch") is None and 'value="Nightly Batch!"' in page  # kept as typed


def test_deleting_a_template_in_use_is_refused_naming_its_tasks(client, auth):
    arrange()
    make_task("export")
    auth.as_role("operator")
    response = client.post("/tasks/templates/nightly/delete", data={"csrf_token": auth.csrf("/tasks/templates/")},
                           follow_redirects=True)
    assert "Not deleted: conflict template &#39;nightly&#39; is used by 1 task(s): default/export" in (
        response.get_data(as_text=True))
    assert templates.find("nightly") is not None


def test_only_people_not_limited_to_a_tenant_change_templates(client, auth):
    arrange()
    globex = make_tenant("globex")
    auth.make_user("gina", "operator", tenant=globex)
    auth.login("gina")
    assert client.get("/tasks/templates/nightly").status_code == 200
    assert post_form(client, auth, "/tasks/templates/nightly", concurrency_policy="forbid").status_code == 403
    assert post_form(client, auth, "/tasks/templates/new", name="mine").status_code == 403
    assert templates.get("nightly").current_version == 1 and templates.find("mine") is None


def test_a_person_limited_to_a_tenant_sees_their_tenants_tasks_of_the_template_and_no_count_of_others(client, auth):
    arrange()
    globex = make_tenant("globex")
    auth.make_user("gina", "viewer", tenant=globex)
    auth.login("gina")
    make_task("export")
    make_task("close")
    page = client.get("/tasks/templates/nightly").get_data(as_text=True)
    # Another tenant's tasks are that tenant's to know: not their names, nor how many there are.
    assert "No task of your tenant references it; other tenants' tasks may." in page and "2 tasks" not in page
    assert "export" not in page and "No task references it" not in page
    make_task("sync", tenant="globex")
    page = client.get("/tasks/templates/nightly").get_data(as_text=True)
    assert re.search(r"Referenced by <a [^>]*><code>sync</code></a> in your tenant; other tenants' tasks may use it "
                     r"too\.", page)


def test_a_viewer_cannot_post_and_a_form_without_csrf_is_refused(client, auth):
    arrange()
    auth.as_role("viewer")
    assert post_form(client, auth, "/tasks/templates/nightly", concurrency_policy="forbid").status_code == 403
    client.post("/logout", data={"csrf_token": auth.csrf("/tasks/templates/")})
    auth.as_role("operator", "otto")
    response = client.post("/tasks/templates/nightly", data={**NIGHTLY, "concurrency_policy": "forbid"})
    assert response.status_code in (400, 422)
    assert templates.get("nightly").current_version == 1


def test_a_viewer_reads_the_template_without_save_or_delete(client, auth):
    arrange()
    auth.as_role("viewer")
    page = client.get("/tasks/templates/nightly").get_data(as_text=True)
    assert "You can read this template; changing it needs the operator role." in page
    assert "Save as version 2" not in page and "Delete template" not in page and " disabled" in page


def test_an_operator_may_save_and_delete_the_template(client, auth):
    arrange()
    auth.as_role("operator")
    page = client.get("/tasks/templates/nightly").get_data(as_text=True)
    assert "You can read this template" not in page
    assert "Save as version 2" in page and 'action="/tasks/templates/nightly/delete"' in page
