"""The approvals API: list and read requests, approve or reject another person's, roll back; four eyes on every call."""

import pytest
from sqlalchemy import update

from console.extensions import db
from console.models import Approval, Run
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.recovery import params_fix
from tests import api_checks
from tests.factories import Runs, bearer, make_tenant

LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}
BROKEN = {"fail_times": 9, "error": "fatal", "code": "bad_account", "message": "account 42 is closed"}
FIXED = {**BROKEN, "fail_times": 0}
FIELDS = {"id", "kind", "status", "requested_by", "reason", "before", "after", "expires_at", "decided_by", "note",
          "outcome", "created_at", "decided_at"}


@pytest.fixture
def runs(app):
    return Runs()


@pytest.fixture
def fix(runs, clock):
    """File a params fix of a fresh dead letter as `requester`; return the request."""

    def file(requester, tenant: str = "default") -> Approval:
        run_id = runs.submit("demo.flaky", BROKEN, policy=LENIENT, tenant=tenant)
        assert execute(run_id, 0, clock=clock) == "dead"
        letter = runs.dead_letters(run_id)[0]
        return params_fix.request_fix(letter.id, FIXED, "the account was reopened",
                                      Actor(requester.username, requester.id))

    return file


@pytest.fixture
def people(auth):
    return {name: auth.make_user(name, role) for name, role in
            (("olga", "operator"), ("alex", "approver"), ("ada", "approver"), ("vic", "viewer"))}


def test_list_and_read_requests_with_keyset_paging(client, people, fix):
    requests = [fix(people["olga"]) for _ in range(3)]
    headers = bearer(people["vic"])
    first = client.get("/api/approvals?status=pending&limit=2", headers=headers)
    assert first.status_code == 200
    page = first.get_json()
    assert [item["id"] for item in page["items"]] == [requests[2].id, requests[1].id]
    assert page["next_before"] == requests[1].id
    rest = client.get(f"/api/approvals?status=pending&limit=2&before={page['next_before']}", headers=headers)
    assert [item["id"] for item in rest.get_json()["items"]] == [requests[0].id]
    assert rest.get_json()["next_before"] is None
    assert client.get("/api/approvals?status=executed", headers=headers).get_json()["items"] == []
    every = client.get("/api/approvals?status=all", headers=headers)  # as the CLI and the console say it
    assert [item["id"] for item in every.get_json()["items"]] == [r.id for r in reversed(requests)]
    bogus = client.get("/api/approvals?status=done", headers=headers)
    assert api_checks.refused(bogus, 422, "invalid", "status")["detail"].startswith("status must be all, or one of")
    fixes = client.get("/api/approvals?kind=dead_letter.fix_params&limit=5", headers=headers).get_json()["items"]
    assert [item["id"] for item in fixes] == [r.id for r in reversed(requests)]
    assert client.get("/api/approvals?kind=run.compensate", headers=headers).get_json()["items"] == []
    wrong = api_checks.refused(client.get("/api/approvals?kind=fix", headers=headers), 422, "invalid", "kind")
    assert wrong["detail"] == ("kind is one of dead_letter.fix_params, dlq.discard_bulk, run.compensate, "
                               "runbook.execute, not 'fix'")

    one = client.get(f"/api/approvals/{requests[0].id}", headers=headers).get_json()
    assert set(one) >= FIELDS
    assert (one["kind"], one["status"], one["requested_by"], one["reason"]) == (
        "dead_letter.fix_params", "pending", "olga", "the account was reopened")
    assert (one["before"], one["after"], one["decided_by"], one["note"]) == (
        {"params": BROKEN}, {"params": FIXED}, None, None)
    assert one["expires_at"].endswith("+00:00")


def test_bad_list_parameters_are_refused_naming_the_field(client, people):
    headers = bearer(people["vic"])
    api_checks.refused(client.get("/api/approvals?status=done", headers=headers), 422, "invalid", "status")
    api_checks.refused(client.get("/api/approvals?limit=0", headers=headers), 422, "invalid", "limit")
    api_checks.refused(client.get("/api/approvals?limit=x", headers=headers), 422, "invalid", "limit")
    api_checks.refused(client.get("/api/approvals?before=-1", headers=headers), 422, "invalid", "before")
    api_checks.refused(client.get("/api/approvals/999", headers=headers), 404, "not_found")
    assert client.get("/api/approvals").status_code == 401


def test_another_approver_approves_and_the_fix_runs_once(client, people, fix, runs):
    request = fix(people["olga"])
    headers = bearer(people["alex"])
    response = client.post(f"/api/approvals/{request.id}/approve", headers=headers, json={"note": "checked"})
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    assert (body["status"], body["decided_by"], body["requested_by"], body["note"]) == (
        "executed", "alex", "olga", "checked")
    assert body["decided_at"] is not None
    run = runs.get(request.payload["run_id"])
    assert (run.status, run.params) == ("pending", FIXED)
    assert body["outcome"] == f"run #{run.id} replayed with the new params (series 2)"  # what ran, for API readers
    again = client.post(f"/api/approvals/{request.id}/approve", headers=bearer(people["ada"]))
    api_checks.refused(again, 409, "conflict", "status")

    by_operator = client.post(f"/api/approvals/{request.id}/rollback", headers=bearer(people["olga"]), json={})
    assert api_checks.refused(by_operator, 403, "forbidden")["detail"] == (
        "your role (operator) may not roll a change back (that needs the approve permission)")
    rolled = client.post(f"/api/approvals/{request.id}/rollback", headers=bearer(people["ada"]), json={})
    assert rolled.status_code == 200 and rolled.get_json()["status"] == "rolled_back"
    assert runs.get(run.id).params == BROKEN


def test_self_approval_is_refused_with_four_eyes(client, people, fix):
    request = fix(people["alex"])  # an approver's own request
    headers = bearer(people["alex"])
    for action in ("approve", "reject"):
        refused = client.post(f"/api/approvals/{request.id}/{action}", headers=headers, json={"note": "mine"})
        body = api_checks.refused(refused, 403, "four_eyes")
        assert "you requested this change" in body["detail"]
    assert db.session.get(Approval, request.id).status == "pending"


def test_a_token_without_approve_is_refused(client, people, fix):
    request = fix(people["alex"])
    for name in ("olga", "vic"):
        refused = client.post(f"/api/approvals/{request.id}/approve", headers=bearer(people[name]))
        api_checks.refused(refused, 403, "forbidden")
    assert db.session.get(Approval, request.id).status == "pending"


def test_expired_and_rejected_requests_never_run(client, people, fix, runs):
    expired = fix(people["olga"])
    db.session.execute(update(Approval).where(Approval.id == expired.id).values(expires_at=expired.created_at))
    db.session.commit()
    headers = bearer(people["alex"])
    refused = client.post(f"/api/approvals/{expired.id}/approve", headers=headers)
    assert api_checks.refused(refused, 409, "conflict", "status")["detail"].startswith(f"request {expired.id} expired")
    assert client.get(f"/api/approvals/{expired.id}", headers=headers).get_json()["status"] == "expired"

    rejected = fix(people["olga"])
    api_checks.refused(client.post(f"/api/approvals/{rejected.id}/reject", headers=headers, json={}),
                       422, "invalid", "note")
    api_checks.refused(client.post(f"/api/approvals/{rejected.id}/reject", headers=headers, json={"why": "x"}),
                       422, "invalid", "why")
    done = client.post(f"/api/approvals/{rejected.id}/reject", headers=headers, json={"note": "fix the account"})
    assert done.status_code == 200 and done.get_json()["status"] == "rejected"
    api_checks.refused(client.post(f"/api/approvals/{rejected.id}/approve", headers=bearer(people["ada"])),
                       409, "conflict", "status")
    for request in (expired, rejected):
        assert db.session.get(Run, request.payload["run_id"]).params == BROKEN


def test_a_tenant_scoped_token_sees_and_decides_only_its_tenants_requests(client, people, fix):
    acme = make_tenant("acme")
    elsewhere = fix(people["olga"])
    own = fix(people["olga"], tenant="acme")
    headers = bearer(people["alex"], tenant=acme)
    listed = client.get("/api/approvals", headers=headers).get_json()["items"]
    assert [item["id"] for item in listed] == [own.id]
    api_checks.refused(client.get(f"/api/approvals/{elsewhere.id}", headers=headers), 404, "not_found")
    api_checks.refused(client.post(f"/api/approvals/{elsewhere.id}/approve", headers=headers), 404, "not_found")
    assert db.session.get(Approval, elsewhere.id).status == "pending"
    assert client.post(f"/api/approvals/{own.id}/approve", headers=headers).get_json()["status"] == "executed"


def test_a_requester_withdraws_their_own_request_over_the_api_and_nobody_else_can(client, people, fix):
    request = fix(people["olga"])
    refused = client.post(f"/api/approvals/{request.id}/withdraw", headers=bearer(people["alex"]), json={})
    api_checks.refused(refused, 403, "forbidden")
    done = client.post(f"/api/approvals/{request.id}/withdraw", headers=bearer(people["olga"]),
                       json={"note": "wrong letter"})
    assert done.status_code == 200 and (done.get_json()["status"], done.get_json()["note"]) == (
        "withdrawn", "wrong letter")
    again = client.post(f"/api/approvals/{request.id}/withdraw", headers=bearer(people["olga"]))
    api_checks.refused(again, 409, "conflict", "status")
