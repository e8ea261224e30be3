"""Pages that show params mask fields named like secrets; the forms that edit them, open to who may, do not."""

from html import unescape

from console.extensions import db
from console.models import Run
from console.services.actor import Actor
from console.services.people import tenants
from console.services.recovery import params_fix
from console.services.scheduling import tasks
from tests.helpers import Auth

SECRETS = {"api_key": "sk_live_4f9a7c21", "nested": {"password": "hunter2-hunter2"}}


def test_a_viewer_reads_a_run_s_params_with_its_secrets_masked(client, auth, dead_run):
    run_id, letter_id = dead_run(**SECRETS)
    auth.as_role("viewer")
    page = unescape(client.get(f"/runs/{run_id}").get_data(as_text=True))
    assert "sk_live_4f9a7c21" not in page and "hunter2-hunter2" not in page
    assert '"api_key": "***"' in page and '"password": "***"' in page
    assert '"code": "bad_account"' in page  # the rest as it is
    assert db.session.get(Run, run_id).params["api_key"] == "sk_live_4f9a7c21"  # only the page masks it


def test_the_fix_form_shows_an_operator_the_params_as_they_are_and_the_approver_masked(app, client, auth, dead_run):
    run_id, letter_id = dead_run(**SECRETS)
    olga = auth.as_role("operator", "olga")
    form = client.get(f"/dlq/{letter_id}/fix").get_data(as_text=True)
    assert "sk_live_4f9a7c21" in form  # she edits them: she may see them
    approval = params_fix.request_fix(letter_id, {**db.session.get(Run, run_id).params, "api_key": "sk_live_new0042"},
                                      "key rotated", Actor(olga.username, olga.id))
    approver = app.test_client()
    Auth(approver).as_role("approver", "alex")
    page = unescape(approver.get(f"/approvals/{approval.id}").get_data(as_text=True))
    assert "sk_live_4f9a7c21" not in page and "sk_live_new0042" not in page and "hunter2-hunter2" not in page
    assert "api_key" in page  # the approver sees that the key changes, not to what


def test_a_task_s_page_masks_its_secret_params(client, auth):
    body = {"name": "sync", "handler": "demo.noop", "cron": "0 * * * *",
            "params": {"token": "tok_5a5a5a5a", "region": "eu"}}
    task = tasks.register(tenants.ensure_default(), body, Actor("seed"))
    auth.as_role("viewer")
    page = unescape(client.get(f"/tasks/{task.id}").get_data(as_text=True))
    assert "tok_5a5a5a5a" not in page and '"token": "***"' in page and '"region": "eu"' in page
