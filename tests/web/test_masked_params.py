"""Pages that show params mask fields named like secrets; the forms that edit them, open to who may, do not."""

import re
from html import unescape

from console.extensions import db
from console.models import AuditEntry, Run
from console.services.actor import Actor
from console.services.people import tenants
from console.services.recovery import params_fix
from console.services.scheduling import tasks
from tests.factories import bearer
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
    # The approver sees that the key changes, not to what: masked alike, it was no row of the change (helper 149).
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "The change · 1 field, before → after" in text
    assert 'params.api_key "***" "*** (changed)"' in text


def test_a_task_s_page_masks_its_secret_params(client, auth):
    body = {"name": "sync", "handler": "demo.noop", "cron": "0 * * * *",
            "params": {"token": "tok_5a5a5a5a", "region": "eu"}}
    task = tasks.register(tenants.ensure_default(), body, Actor("seed"))
    auth.as_role("viewer")
    page = unescape(client.get(f"/tasks/{task.id}").get_data(as_text=True))
    assert "tok_5a5a5a5a" not in page and '"token": "***"' in page and '"region": "eu"' in page


def test_the_api_shows_params_as_stored_to_who_may_change_them_and_masked_to_a_viewer(app, client, auth, dead_run):
    """A viewer's token read in clear what the pages mask; an operator's reads them as stored (it may fix them)."""
    run_id, letter_id = dead_run(**SECRETS)
    task = tasks.register(tenants.ensure_default(), {"name": "sync", "handler": "demo.noop", "cron": "0 * * * *",
                                                     "params": {"token": "tok_5a5a5a5a"}}, Actor("seed"))
    paths = [f"/worker/tasks/{run_id}", f"/api/dead-letters/{letter_id}", f"/internal/tasks/{task.id}"]
    viewer, operator = (bearer(auth.make_user(role, role)) for role in ("viewer", "operator"))
    for path in paths:
        read = client.get(path, headers=viewer)
        text = read.get_data(as_text=True)
        assert read.status_code == 200 and '"***"' in text, path
        assert not [secret for secret in ("sk_live_4f9a7c21", "hunter2-hunter2", "tok_5a5a5a5a") if secret in text]
        assert "***" not in client.get(path, headers=operator).get_data(as_text=True), path


def test_a_request_to_approve_reads_masked_over_the_api_for_everyone(app, client, auth, dead_run):
    run_id, letter_id = dead_run(**SECRETS)
    olga = auth.make_user("olga", "operator")
    approval = params_fix.request_fix(letter_id, {**db.session.get(Run, run_id).params, "api_key": "sk_live_new0042"},
                                      "key rotated", Actor(olga.username, olga.id))
    for role in ("viewer", "approver"):
        body = client.get(f"/api/approvals/{approval.id}", headers=bearer(auth.make_user(role, role))).get_json()
        assert (body["before"]["params"]["api_key"], body["after"]["params"]["api_key"]) == ("***", "*** (changed)")
        assert body["before"]["params"]["nested"] == body["after"]["params"]["nested"] == {"password": "***"}
        listed = client.get("/api/approvals", headers=bearer(auth.make_user(f"{role}2", role))).get_json()
        assert "sk_live" not in str(listed)
    # The audit chain keeps the request the same way, for good.
    filed = AuditEntry.query.filter_by(action="approval.request").one()
    assert (filed.after["before"]["params"]["api_key"], filed.after["after"]["params"]["api_key"]) == (
        "***", "*** (changed)")


def test_a_runbook_execution_masks_secrets_in_its_params_text_and_its_changes_on_page_and_api(app, client, auth,
                                                                                                 dead_run):
    """fix_params_and_replay's params are JSON typed as text, and its changes carry the run's params: both showed a
    viewer the keys in clear, on the page and through the API."""
    from console.services.recovery import runbook_runner, runbooks

    run_id, letter_id = dead_run(**SECRETS)
    execution = runbooks.start("fix_params_and_replay", {
        "dead_letter": str(letter_id), "params": '{"fail_times": 0, "token": "S3CR-rbtok"}', "merge": "true"},
        Actor("ops"), scope=None, dry_run=True, enqueue=False)
    assert runbook_runner.execute(execution.id) == "succeeded"
    # An operator's or an approver's token read them in clear: no one edits an execution's params (helper 125).
    reads = [client.get(f"/api/runbooks/executions/{execution.id}", headers=bearer(auth.make_user(role, role)))
             .get_data(as_text=True) for role in ("viewer", "operator", "approver")]
    auth.as_role("viewer", "vera")
    page = unescape(client.get(f"/runbooks/executions/{execution.id}").get_data(as_text=True))
    for shown in (*reads, page):
        assert not [s for s in ("S3CR-rbtok", "sk_live_4f9a7c21", "hunter2-hunter2") if s in shown], shown
        assert "api_key" in shown  # what changes is named; its value is not


def test_a_params_fix_on_a_run_s_timeline_reads_masked_to_a_viewer_over_the_api(app, client, auth, dead_run):
    run_id, letter_id = dead_run(**SECRETS)
    olga, alex = auth.make_user("olga", "operator"), auth.make_user("alex", "approver")
    approval = params_fix.request_fix(letter_id, {"api_key": "sk_live_new0042"}, "key rotated",
                                      Actor(olga.username, olga.id), merge=True)
    from console.services.recovery import decisions

    decisions.approve(approval.id, Actor(alex.username, alex.id))
    events = client.get(f"/worker/tasks/{run_id}", headers=bearer(auth.make_user("viewer", "viewer"))).get_json()
    assert "sk_live" not in str(events["events"]) and "***" in str(events["events"])
    as_operator = client.get(f"/worker/tasks/{run_id}", headers=bearer(olga)).get_json()
    assert "sk_live_new0042" in str(as_operator["events"])  # who may fix params reads them as stored
