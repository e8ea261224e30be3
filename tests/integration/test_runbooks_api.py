"""The runbooks API: list, start (202, or awaiting approval), invalid params as a 422 naming the field, read back;
a tenant-scoped token runs runbooks only on its own tenant's objects."""

from sqlalchemy import select

from console.extensions import db
from console.models import RunbookExecution
from console.services.actor import Actor
from console.services.people import users
from console.services.recovery import runbook_runner
from tests.factories import bearer, make_tenant


def token(role: str = "operator", name: str = "svc", tenant=None) -> dict:
    user, _ = users.create(name, role, "correct-horse-battery", Actor("test"), tenant=tenant)
    return bearer(user, tenant)


def count() -> int:
    db.session.expire_all()
    return len(db.session.execute(select(RunbookExecution.id)).all())


def test_list_runbooks_with_their_risk_and_declared_params(client):
    response = client.get("/api/runbooks", headers=token("viewer"))
    assert response.status_code == 200
    found = {item["name"]: item for item in response.json}
    assert set(found) == {"replay_dead_letters", "discard_dead_letters", "resolve_runs", "fix_params_and_replay",
                          "retry_waiting_runs", "cancel_waiting_runs", "backfill_task", "purge_finished_runs",
                          "purge_settled_messages", "engine_reconcile"}
    resolve = found["resolve_runs"]
    assert (resolve["risk"], resolve["needs_approval"], resolve["scope"]) == ("high", True, "tenant")
    assert resolve["params"][0] == {"name": "runs", "type": "run", "required": True, "default": None, "choices": None,
                                    "many": True, "minimum": None, "maximum": None, "json_object": False,
                                    "help": "Run ids, separated by commas or spaces."}
    assert found["engine_reconcile"]["scope"] == "system"


def test_start_a_dry_run_then_read_it_back_with_its_changes_and_log(client, dead_run):  # noqa: F811
    run_id, letter_id = dead_run()
    headers = token()
    response = client.post("/api/runbooks/replay_dead_letters/executions", headers=headers,
                           json={"params": {"code": "bad_account", "rate": 10}, "dry_run": True})
    assert response.status_code == 202
    assert response.json == {"id": response.json["id"], "status": "queued", "approval_id": None}
    assert response.headers["Location"] == f"/api/runbooks/executions/{response.json['id']}"
    runbook_runner.execute(response.json["id"])
    body = client.get(response.headers["Location"], headers=headers).json
    assert (body["runbook"], body["status"], body["dry_run"], body["approval_id"]) == (
        "replay_dead_letters", "succeeded", True, None)
    assert body["params"]["code"] == "bad_account"
    assert body["changes"] == [
        {"object": "dead_letter", "id": str(letter_id), "field": "status", "before": "open", "after": "replayed"},
        {"object": "run", "id": str(run_id), "field": "status", "before": "dead", "after": "pending"}]
    assert any("1 open dead letter with code bad_account." in line for line in body["log"])


def test_a_params_fix_takes_the_new_params_as_a_json_object_or_as_its_text(client, dead_run):  # noqa: F811
    run_id, letter_id = dead_run()
    headers = token()
    described = {item["name"]: item for item in client.get("/api/runbooks", headers=headers).json}
    [params] = [p for p in described["fix_params_and_replay"]["params"] if p["name"] == "params"]
    assert (params["type"], params["json_object"]) == ("str", True)
    for given in ({"fail_times": 0}, '{"fail_times": 0}'):
        response = client.post("/api/runbooks/fix_params_and_replay/executions", headers=headers, json={
            "params": {"dead_letter": letter_id, "params": given}, "dry_run": True})
        assert response.status_code == 202, response.json
        runbook_runner.execute(response.json["id"])
        body = client.get(response.headers["Location"], headers=headers).json
        assert body["status"] == "succeeded" and any('"fail_times": 0' in line for line in body["log"]), body
    for wrong, says in (([1], "a JSON object, or its text"), ("[1]", 'a JSON object, like {"account": 42}')):
        answer = client.post("/api/runbooks/fix_params_and_replay/executions", headers=headers, json={
            "params": {"dead_letter": letter_id, "params": wrong}, "dry_run": True})
        assert (answer.status_code, answer.json["field"], answer.json["errors"]["params"]) == (422, "params", says)


def test_a_real_run_that_needs_approval_answers_awaiting_approval(client, dead_run):  # noqa: F811
    run_id, _ = dead_run()
    response = client.post("/api/runbooks/resolve_runs/executions", headers=token(),
                           json={"params": {"runs": [run_id], "note": "paid"}, "reason": "refunded by hand"})
    assert response.status_code == 202
    assert response.json["status"] == "awaiting_approval" and isinstance(response.json["approval_id"], int)
    missing = client.post("/api/runbooks/resolve_runs/executions", headers=token(name="svc2"),
                          json={"params": {"runs": [run_id], "note": "paid"}})
    assert (missing.status_code, missing.json["field"]) == (422, "reason")


def test_invalid_params_are_a_422_naming_the_field_and_nothing_is_filed(client):
    headers = token()
    response = client.post("/api/runbooks/backfill_task/executions", headers=headers,
                           json={"params": {"task": "x", "start": "2026-01-01T00:00"}, "dry_run": True})
    assert response.status_code == 422
    assert response.json["error"] == "invalid" and response.json["field"] == "task"
    assert response.json["errors"] == {"task": "an id (a whole number)", "end": "required"}
    for payload, field in (({"params": [1]}, "params"), ({"dry_run": "yes"}, "dry_run"),
                           ({"tenant": 5}, "tenant"), ({"colour": "red"}, "colour"),
                           ({"params": {"rate": 0}}, "rate"), ({"params": {"rate": 10**400}}, "rate"),
                           ({"params": {"limit": 10**400}}, "limit"),
                           # A stray space read as "every tenant", [] as "the default 1000" (helper 165).
                           ({"tenant": " "}, "tenant"), ({"tenant": "\t\n"}, "tenant"),
                           ({"params": {"limit": []}}, "limit")):
        answer = client.post("/api/runbooks/replay_dead_letters/executions", headers=headers, json=payload)
        assert (answer.status_code, answer.json["field"]) == (422, field), payload
    assert client.post("/api/runbooks/nope/executions", headers=headers, json={}).status_code == 404
    assert client.post("/api/runbooks/replay_dead_letters/executions", headers=headers, data="x").status_code == 400
    assert count() == 0


def test_a_tenant_scoped_token_runs_runbooks_only_on_its_tenants_objects(client, dead_run):  # noqa: F811
    acme = make_tenant("acme")
    _, theirs = dead_run("default")
    headers = token(tenant=acme)
    answer = client.post("/api/runbooks/fix_params_and_replay/executions", headers=headers, json={
        "params": {"dead_letter": theirs, "params": "{}"}, "dry_run": True})
    assert (answer.status_code, answer.json["field"]) == (422, "dead_letter")
    assert "in your tenant" in answer.json["detail"]
    other = client.post("/api/runbooks/replay_dead_letters/executions", headers=headers,
                        json={"tenant": "default", "dry_run": True})
    assert (other.status_code, other.json["error"]) == (403, "forbidden")
    system = client.post("/api/runbooks/engine_reconcile/executions", headers=headers, json={"dry_run": True})
    assert system.status_code == 403
    assert count() == 0
    mine = client.post("/api/runbooks/replay_dead_letters/executions", headers=headers, json={"dry_run": True})
    assert mine.status_code == 202
    unscoped = client.post("/api/runbooks/engine_reconcile/executions", headers=token(name="root"),
                           json={"dry_run": True})
    assert client.get(f"/api/runbooks/executions/{mine.json['id']}", headers=headers).json["tenant"] == "acme"
    assert client.get(f"/api/runbooks/executions/{unscoped.json['id']}", headers=headers).status_code == 404


def test_viewers_read_but_may_not_start_and_sessions_are_refused(client, auth):
    assert client.post("/api/runbooks/engine_reconcile/executions", headers=token("viewer"),
                       json={"dry_run": True}).status_code == 403
    auth.as_role("operator")
    assert client.get("/api/runbooks").status_code == 401  # a session cookie is not a token
    assert count() == 0
