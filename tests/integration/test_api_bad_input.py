"""Every bad API input gets a clear 4xx JSON answer, never a 500, and nothing is half-written."""

from datetime import datetime

import pytest
from sqlalchemy import func, select, update

from console.domain.breaker import BreakerSettings
from console.domain.clock import utcnow
from console.extensions import db
from console.models import AuditEntry, OutboxMessage, PolicyVersion, RetryPolicyRecord, Run, RunEvent, Task
from console.services.actor import Actor
from console.services.engine import breakers
from console.services.engine.execute import execute
from console.services.people import tenants
from console.services.scheduling import tasks
from tests import api_checks
from tests.factories import bearer, make_tenant

COUNTED = {"runs": Run, "run_events": RunEvent, "policies": RetryPolicyRecord, "policy_versions": PolicyVersion,
           "audit": AuditEntry, "outbox": OutboxMessage}


def counts() -> dict[str, int]:
    return api_checks.counts(COUNTED)


def nothing_written():
    return api_checks.nothing_written(COUNTED)


def refused(response, status: int, error: str, field: str | None = None) -> dict:
    """Assert a clear JSON refusal that carries nothing but error, detail and field."""
    body = api_checks.refused(response, status, error, field)
    assert set(body) <= {"error", "detail", "field"}
    return body




def set_status(run_id: int, status: str) -> None:
    db.session.execute(update(Run).where(Run.id == run_id).values(status=status))
    db.session.commit()


@pytest.fixture
def operator(auth):
    """Headers of an operator token that may act for every tenant."""
    return bearer(auth.make_user("svc", "operator"))


@pytest.fixture
def submitted(client, operator):
    """Submit a demo.noop run (it stays pending: no worker runs) and return its id."""

    def submit(**fields) -> int:
        response = client.post("/worker/tasks", json={"handler": "demo.noop", **fields}, headers=operator)
        assert response.status_code == 202, response.get_data(as_text=True)
        return response.json["id"]

    return submit


# --- POST /worker/tasks ---------------------------------------------------------------------------------------


def test_good_submission_is_202_pending_and_its_run_shows_one_submitted_event(client, operator):
    response = client.post("/worker/tasks", json={"handler": "demo.noop", "params": {"n": 1}}, headers=operator)
    assert response.status_code == 202
    assert response.json["status"] == "pending" and response.json["created"] is True
    run_id = response.json["id"]
    assert isinstance(run_id, int)

    run = client.get(f"/worker/tasks/{run_id}", headers=operator)
    assert run.status_code == 200
    body = run.json
    assert (body["id"], body["status"], body["attempt"], body["handler"]) == (run_id, "pending", 0, "python:demo.noop")
    assert [event["kind"] for event in body["events"]] == ["submitted"]
    times = [body["created_at"], body["enqueued_at"], body["scheduled_for"], body["events"][0]["at"]]
    assert all(datetime.fromisoformat(moment).utcoffset() is not None for moment in times), times
    assert body["policy_overrides"] == {}


def test_a_runs_read_shows_the_policy_fields_its_submission_set(client, operator):
    """A run that stopped after one attempt of the default five said policy "default" and nothing of why."""
    sent = client.post("/worker/tasks", json={"handler": "demo.noop", "policy": {"max_attempts": 1}}, headers=operator)
    body = client.get(f"/worker/tasks/{sent.json['id']}", headers=operator).json
    assert (body["policy"], body["policy_overrides"]) == ("default", {"max_attempts": 1})


@pytest.mark.parametrize(("payload", "status", "error", "field", "says"), [
    pytest.param({"handler": "demo.noop", "priority": 5}, 422, "invalid", "priority", "priority", id="unknown-field"),
    pytest.param({"params": {}}, 422, "invalid", "handler", "exactly one", id="neither-handler-nor-task"),
    pytest.param({"handler": "demo.nope"}, 422, "invalid", "handler", "demo.noop", id="unknown-handler"),
    pytest.param({"handler": 5}, 422, "invalid", "handler", "handler", id="handler-not-a-string"),
    pytest.param({"task_id": "nightly"}, 422, "invalid", "task_id", "nightly", id="task-id-not-a-number"),
    pytest.param({"task_id": 999}, 422, "invalid", "task_id", "999", id="unknown-task"),
    pytest.param({"handler": "demo.noop", "params": [1]}, 422, "invalid", "params", "params", id="params-a-list"),
    pytest.param({"handler": "demo.noop", "idempotency_key": "k" * 201}, 422, "invalid", "idempotency_key", "200",
                 id="key-too-long"),
    pytest.param({"handler": "demo.noop", "idempotency_key": ""}, 422, "invalid", "idempotency_key", "200",
                 id="key-empty"),
    pytest.param({"handler": "demo.noop", "idempotency_key": "   "}, 422, "invalid", "idempotency_key", "only spaces",
                 id="key-blank"),  # taken before: every client's "   " named one run
    pytest.param({"handler": "demo.noop", "idempotency_key": "\u200b\u200e "}, 422, "invalid", "idempotency_key",
                 "invisible characters", id="key-invisible"),  # a zero-width space and a bidi mark show nothing
    pytest.param({"handler": "demo.noop", "policy": {"max_attempts": 0}}, 422, "invalid", "policy.max_attempts",
                 "1 to 100", id="override-out-of-range"),
    # A policy's save refuses these two; a run's own override took them (helper 94).
    pytest.param({"handler": "demo.noop", "policy": {"sla": {"max_start_delay_s": 100, "deadline_s": 10}}}, 422,
                 "invalid", "policy.sla.deadline_s", "must be at least max_start_delay_s", id="override-sla-backwards"),
    pytest.param({"handler": "demo.noop", "policy": {"retryable_codes": ["x" * 81]}}, 422, "invalid",
                 "policy.retryable_codes", "at most", id="override-code-too-long"),
    # Each run keeps its override: 30,000 codes in a 1 MB body were a megabyte a run (helper 152).
    pytest.param({"handler": "demo.noop", "policy": {"non_retryable_codes": [f"c{n}" for n in range(201)]}}, 422,
                 "invalid", "policy.non_retryable_codes", "holds 201 codes; a list holds at most 200",
                 id="override-too-many-codes"),
    pytest.param({"handler": "demo.noop", "idempotency_key": "order\n7"}, 422, "invalid", "idempotency_key",
                 "'\\n' at position 6", id="key-with-a-newline"),
    # A zero-width space passed: two keys that look alike on every page (helper 97).
    pytest.param({"handler": "demo.noop", "idempotency_key": "order\u200b7"}, 422, "invalid", "idempotency_key",
                 "U+200B (zero width space) at position 6", id="key-with-a-zero-width-space"),
    pytest.param({"handler": "demo.noop", "policy": {"breaker": {"open_s": 0}}}, 422, "invalid",
                 "policy.breaker.open_s", "open_s", id="nested-override-out-of-range"),
    # Too large for a float: math.isfinite() raised OverflowError, a 500.
    pytest.param({"handler": "demo.noop", "policy": {"max_attempts": 10 ** 400}}, 422, "invalid", "policy.max_attempts",
                 "got a 401-digit number", id="override-too-large-for-a-float"),
    pytest.param({"handler": "demo.noop", "policy": {"max_atempts": 3}}, 422, "invalid", "policy.max_atempts",
                 "max_atempts", id="override-unknown-field"),
    pytest.param({"handler": "demo.noop", "policy": "no-such-policy"}, 422, "invalid", "policy", "no-such-policy",
                 id="unknown-policy-name"),
    pytest.param({"handler": "demo.noop", "policy": ["default"]}, 422, "invalid", "policy", "policy",
                 id="policy-a-list"),
    pytest.param({"handler": "demo.noop", "tenant": "nowhere"}, 422, "invalid", "tenant", "nowhere",
                 id="unknown-tenant"),
    pytest.param({"handler": "demo.noop", "tenant": 7}, 422, "invalid", "tenant", "tenant", id="tenant-not-a-name"),
])
def test_bad_submission_is_refused_and_creates_nothing(client, operator, payload, status, error, field, says):
    with nothing_written():
        body = refused(client.post("/worker/tasks", json=payload, headers=operator), status, error, field)
    assert says in body["detail"]


@pytest.mark.parametrize(("data", "content_type"), [
    pytest.param("handler=demo.noop", "application/x-www-form-urlencoded", id="a-form"),
    pytest.param('["demo.noop"]', "application/json", id="a-list"),
    pytest.param('"demo.noop"', "application/json", id="a-string"),
])
def test_body_that_is_not_a_json_object_is_400(client, operator, data, content_type):
    # Broken JSON is a 400 bad_json saying so (test_hostile_input.py).
    with nothing_written():
        body = refused(client.post("/worker/tasks", data=data, content_type=content_type, headers=operator),
                       400, "bad_request")
    assert "JSON object" in body["detail"]


def test_handler_and_task_id_together_are_refused(client, operator):
    task = Task(tenant_id=tenants.find("default").id, name="nightly", handler="python:demo.noop")
    db.session.add(task)
    db.session.commit()
    with nothing_written():
        body = refused(client.post("/worker/tasks", json={"handler": "demo.noop", "task_id": task.id},
                                   headers=operator), 422, "invalid", "handler")
    assert "exactly one of handler or task_id" in body["detail"]


def test_plugin_handler_without_a_plugin_runtime_is_refused(app, client, operator, monkeypatch):
    monkeypatch.setitem(app.config, "PLUGIN_RUNTIME_URL", "")
    with nothing_written():
        body = refused(client.post("/worker/tasks", json={"handler": "plugin:x"}, headers=operator),
                       422, "invalid", "handler")
    assert "REBOUND_PLUGIN_RUNTIME_URL" in body["detail"]


def test_tenant_limited_token_may_not_name_another_tenant(client, auth):
    acme = make_tenant("acme")
    make_tenant("globex")
    headers = bearer(auth.make_user("acme-svc", "operator"), tenant=acme)
    with nothing_written():
        body = refused(client.post("/worker/tasks", json={"handler": "demo.noop", "tenant": "globex"},
                                   headers=headers), 403, "forbidden", "tenant")
    assert "acme" in body["detail"]


def test_viewer_token_may_not_submit(client, auth):
    headers = bearer(auth.make_user("vic", "viewer"))
    with nothing_written():
        body = refused(client.post("/worker/tasks", json={"handler": "demo.noop"}, headers=headers),
                       403, "forbidden")
    assert "viewer" in body["detail"]


def test_same_key_resubmission_returns_the_same_run_with_200(client, operator):
    first = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "order-42"},
                        headers=operator)
    assert first.status_code == 202
    with nothing_written():
        again = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "order-42"},
                            headers=operator)
    assert again.status_code == 200
    assert again.json == {**first.json, "created": False, "result": None, "error": None}
    assert again.json["id"] == first.json["id"] and again.json["idempotency_key"] == "order-42"


def test_a_request_sent_again_returns_the_result_its_run_recorded(client, operator):
    """Seed 004: "a duplicate request returns the recorded result" without running it again; the answer said only
    where to look (helper 132)."""
    done = client.post("/worker/tasks", json={"handler": "demo.flaky", "params": {"fail_times": 0},
                                              "idempotency_key": "pay-7"}, headers=operator).json
    assert execute(done["id"], 0) == "succeeded"
    again = client.post("/worker/tasks", json={"handler": "demo.flaky", "params": {"fail_times": 0},
                                               "idempotency_key": "pay-7"}, headers=operator)
    recorded = db.session.get(Run, done["id"]).result
    assert again.status_code == 200 and recorded and again.json["result"] == recorded and again.json["error"] is None
    failed = client.post("/worker/tasks", json={"handler": "demo.flaky", "idempotency_key": "pay-8",
                                                "params": {"fail_times": 9, "error": "fatal", "code": "card_declined"}},
                         headers=operator).json
    assert execute(failed["id"], 0) == "dead"
    again = client.post("/worker/tasks", json={"handler": "demo.flaky", "idempotency_key": "pay-8"}, headers=operator)
    assert again.json["status"] == "dead" and again.json["error"]["code"] == "card_declined"
    assert db.session.get(Run, done["id"]).executions == 1  # nothing ran again


def test_queue_limit_overflow_is_429_with_an_alert_and_no_third_run(client, operator):
    for key in ("q-1", "q-2"):
        response = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": key,
                                                      "policy": {"queue_limit": 2}}, headers=operator)
        assert response.status_code == 202
    before = counts()
    response = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "q-3",
                                                  "policy": {"queue_limit": 2}}, headers=operator)
    assert response.status_code == 429 and response.headers["Retry-After"] == "10"  # clients' retry logic reads it
    body = response.json
    assert (body["error"], body["field"], body["limit"], body["current"], body["max"]) == (
        "queue_full", "queue_limit", "queue_limit", 2, 2)
    assert "queue_limit" in body["detail"]
    assert counts() == {**before, "outbox": before["outbox"] + 1}
    alert = db.session.execute(select(OutboxMessage).where(OutboxMessage.kind == "alert")).scalar_one()
    assert alert.payload["rule"] == "queue_overflow"
    assert (alert.payload["limit"], alert.payload["current"], alert.payload["max"]) == ("queue_limit", 2, 2)
    assert db.session.execute(select(func.count()).select_from(Run)).scalar_one() == 2


# --- GET /worker/tasks/{run_id} and cancel --------------------------------------------------------------------


def test_another_tenants_run_is_404_for_a_tenant_limited_token(client, auth, submitted):
    run_id = submitted()  # in the default tenant
    acme = make_tenant("acme")
    headers = bearer(auth.make_user("acme-svc", "operator"), tenant=acme)
    refused(client.get(f"/worker/tasks/{run_id}", headers=headers), 404, "not_found")
    with nothing_written():
        refused(client.post(f"/worker/tasks/{run_id}/cancel", headers=headers), 404, "not_found")
    assert db.session.get(Run, run_id).status == "pending"


def test_unknown_run_is_404(client, operator):
    refused(client.get("/worker/tasks/999", headers=operator), 404, "not_found")
    with nothing_written():
        refused(client.post("/worker/tasks/999/cancel", headers=operator), 404, "not_found")


@pytest.mark.parametrize("zero", [0x0660, 0xFF10, 0x0966])  # Arabic-Indic, fullwidth, Devanagari digits
def test_an_id_in_a_path_is_ascii_digits_only(client, operator, submitted, zero):
    # int() reads any Unicode digit: each run had several addresses, which a proxy's rule keyed on the path misses.
    run_id = submitted()
    assert client.get(f"/worker/tasks/{run_id}", headers=operator).status_code == 200
    other = "".join(chr(zero + int(digit)) for digit in str(run_id))
    refused(client.get(f"/worker/tasks/{other}", headers=operator), 404, "not_found")


def test_a_path_no_endpoint_answers_says_so_in_its_own_words(client, operator):
    # werkzeug's "The requested URL was not found on the server. If you entered the URL manually..." (helper 135)
    body = refused(client.get("/worker/tasks/abc", headers=operator), 404, "not_found")
    assert body["detail"] == ("no endpoint answers GET /worker/tasks/abc: check the path against /openapi.json (ids in "
                              "a path are whole numbers)")


def test_cancelling_a_succeeded_run_is_409_and_changes_nothing(client, operator, submitted):
    run_id = submitted()
    set_status(run_id, "succeeded")
    with nothing_written():
        body = refused(client.post(f"/worker/tasks/{run_id}/cancel", headers=operator), 409, "conflict", "status")
    assert "succeeded" in body["detail"]
    assert db.session.execute(select(Run.status).where(Run.id == run_id)).scalar_one() == "succeeded"


# --- POST /internal/tasks/retry -------------------------------------------------------------------------------


@pytest.mark.parametrize(("payload", "status", "error", "field"), [
    pytest.param({}, 422, "invalid", "run_id", id="no-run-named"),
    pytest.param({"run_id": "1"}, 422, "invalid", "run_id", id="run-id-not-a-number"),
    pytest.param({"idempotency_key": "nope"}, 404, "not_found", None, id="unknown-key"),
    pytest.param({"run_id": 999}, 404, "not_found", None, id="unknown-run"),
    pytest.param({"run_id": 10 ** 30}, 404, "not_found", None, id="run-id-past-every-id"),
    pytest.param({"run_id": 1, "bogus": 1}, 422, "invalid", "bogus", id="unknown-field"),
    pytest.param({"idempotency_key": "nope", "tenant": "nobody"}, 422, "invalid", "tenant", id="unknown-tenant"),
    # Both named two runs, and the id won without a word (helper 163).
    pytest.param({"run_id": 1, "idempotency_key": "another"}, 422, "invalid", "idempotency_key", id="id-and-key"),
    pytest.param({"run_id": 1, "idempotency_key": 12345}, 422, "invalid", "idempotency_key", id="id-and-bad-key"),
])
def test_bad_retry_is_refused(client, operator, payload, status, error, field):
    with nothing_written():
        refused(client.post("/internal/tasks/retry", json=payload, headers=operator), status, error, field)


def test_a_retry_by_key_looks_in_the_tenant_named(client, operator, runs, clock):
    make_tenant("acme")
    run_id = runs.submit("demo.flaky", {"fail_times": 9, "error": "fatal"}, tenant="acme", idempotency_key="only-acme")
    execute(run_id, 0, clock=clock)
    missing = refused(client.post("/internal/tasks/retry", json={"idempotency_key": "only-acme"}, headers=operator),
                      404, "not_found")
    assert missing["detail"] == ("no run of tenant default has idempotency key 'only-acme'; keys are per tenant: "
                                 'name it with "tenant"')
    found = client.post("/internal/tasks/retry", json={"idempotency_key": "only-acme", "tenant": "acme"},
                        headers=operator)
    assert (found.status_code, found.json["id"], found.json["status"]) == (202, run_id, "pending")


def test_a_tenant_named_beside_a_run_id_is_checked_not_ignored(client, operator, runs, clock):
    """Garbage or another tenant's name beside the id retried the run all the same."""
    make_tenant("acme")
    run_id = runs.submit("demo.flaky", {"fail_times": 9, "error": "fatal"}, tenant="acme")
    execute(run_id, 0, clock=clock)
    with nothing_written():
        refused(client.post("/internal/tasks/retry", json={"run_id": run_id, "tenant": 10**400}, headers=operator),
                422, "invalid", "tenant")
        refused(client.post("/internal/tasks/retry", json={"run_id": run_id, "tenant": "nobody"}, headers=operator),
                422, "invalid", "tenant")
        refused(client.post("/internal/tasks/retry", json={"run_id": run_id, "tenant": ""}, headers=operator),
                422, "invalid", "tenant")  # was a 404 saying "not tenant 's" (helper 121)
        wrong = refused(client.post("/internal/tasks/retry", json={"run_id": run_id, "tenant": "default"},
                                    headers=operator), 404, "not_found")
    assert wrong["detail"] == f"run {run_id} is not tenant default's"
    found = client.post("/internal/tasks/retry", json={"run_id": run_id, "tenant": "acme"}, headers=operator)
    assert (found.status_code, found.json["status"]) == (202, "pending")


def test_a_tenant_limited_token_is_not_told_to_name_a_tenant_it_cannot(client, auth, runs):
    acme = make_tenant("acme")
    scoped = bearer(auth.make_user("sam", "operator", tenant=acme), tenant=acme)
    missing = refused(client.post("/internal/tasks/retry", json={"idempotency_key": "nope"}, headers=scoped),
                      404, "not_found")
    assert missing["detail"] == "no run of tenant acme has idempotency key 'nope'"


def test_a_retry_pulled_forward_under_an_open_breaker_says_it_waits_for_it_again(client, operator, runs, clock):
    run_id = runs.submit(policy={"breaker": {"failure_threshold": 1, "open_s": 600}})
    run = runs.get(run_id)
    breakers.record(breakers.key_for(run.handler, run.tenant_id, "handler"), False, utcnow(),
                    BreakerSettings(failure_threshold=1, open_s=600))
    assert execute(run_id, 0) == "breaker_open"
    answer = client.post("/internal/tasks/retry", json={"run_id": run_id}, headers=operator)
    assert answer.status_code == 202 and answer.json["status"] == "pending"
    assert "breaker is open until" in answer.json["note"] and "waits for it again" in answer.json["note"]


def test_retrying_a_pending_run_with_a_new_policy_is_409_and_keeps_its_policy(client, operator, submitted):
    run_id = submitted()
    with nothing_written():
        refused(client.post("/internal/tasks/retry", json={"run_id": run_id, "policy": {"max_attempts": 9}},
                            headers=operator), 409, "conflict", "status")
    db.session.expire_all()
    run = db.session.get(Run, run_id)
    assert (run.status, run.policy_overrides) == ("pending", {})


# --- PUT /internal/policies/{name} ----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "payload", "field"), [
    pytest.param("default", {"max_attempts": 0}, "max_attempts", id="out-of-range"),
    pytest.param("default", {"max_atempts": 3}, "max_atempts", id="unknown-field"),
    pytest.param("default", {"breaker": {"open_s": 0}}, "breaker.open_s", id="nested-out-of-range"),
    pytest.param("default", {"breaker": {"scope": "tenant"}}, "breaker.scope", id="unknown-breaker-scope"),
    pytest.param("default", {"breaker_scope": ["handler"]}, "breaker_scope", id="breaker-scope-not-text"),
    pytest.param("default", {"retryable_codes": "timeout"}, "retryable_codes", id="codes-a-string"),
    pytest.param("default", {"retryable_codes": ["timeout", "x" * 100_000]}, "retryable_codes",
                 id="code-too-long"),
    pytest.param("fresh", {"non_retryable_codes": ["y" * 81]}, "non_retryable_codes",
                 id="new-policy-code-too-long"),
    pytest.param("fresh", {"retryable_codes": ["timeout"] * 201}, "retryable_codes", id="new-policy-too-many-codes"),
    pytest.param("default", {"max_attempts": 3, "description": 5}, "description", id="description-not-text"),
    pytest.param("fresh", {"jitter": 2}, "jitter", id="new-policy-out-of-range"),
    pytest.param("Bad_Name", {"max_attempts": 3}, "name", id="invalid-name"),
    pytest.param("default", {"sla": {"max_start_delay_s": 600, "deadline_s": 60}}, "sla.deadline_s",
                 id="deadline-before-start-limit"),
    pytest.param("fresh", {"max_start_delay_s": 600, "deadline_s": 599}, "deadline_s",
                 id="flat-deadline-before-start-limit"),
])
def test_bad_policy_edit_adds_no_version_and_no_audit_row(client, operator, name, payload, field):
    # The body is the policy: its fields are named as sent (it said "policy.jitter" of a body without "policy").
    with nothing_written():
        refused(client.put(f"/internal/policies/{name}", json=payload, headers=operator), 422, "invalid", field)
    assert client.get("/internal/policies/default", headers=operator).json["version"] == 1


@pytest.mark.parametrize("codes", [{"x" * 5000: 1}, ["ok", {"y" * 5000: 1}]], ids=["not-a-list", "not-a-code"])
def test_a_refused_code_list_is_named_not_echoed_whole(client, operator, codes):
    body = refused(client.post("/worker/tasks", json={"handler": "demo.noop", "policy": {"retryable_codes": codes}},
                               headers=operator), 422, "invalid", "policy.retryable_codes")
    assert "xxxxxxxx" in body["detail"] or "yyyyyyyy" in body["detail"]
    assert len(body["detail"]) < 200


def test_a_too_long_code_is_refused_naming_the_field_and_the_limit(client, operator):
    with nothing_written():
        body = refused(client.put("/internal/policies/default", json={"retryable_codes": ["z" * 81]},
                                  headers=operator), 422, "invalid", "retryable_codes")
    assert body["detail"].startswith("retryable_codes holds a code of 81 characters")
    assert "an error code is at most 80 characters" in body["detail"]
    assert client.put("/internal/policies/default", json={"retryable_codes": ["z" * 80]},
                      headers=operator).status_code == 200


def test_breaker_scope_is_saved_and_read_back_in_both_spellings(client, operator):
    created = client.put("/internal/policies/per-tenant", json={"breaker": {"scope": "handler_and_tenant"}},
                         headers=operator)
    assert created.status_code == 201 and created.json["spec"]["breaker_scope"] == "handler_and_tenant"
    flat = client.put("/internal/policies/per-tenant", json={"breaker_scope": "handler"}, headers=operator)
    assert (flat.status_code, flat.json["version"], flat.json["spec"]["breaker_scope"]) == (200, 2, "handler")
    assert client.get("/internal/policies/default", headers=operator).json["spec"]["breaker_scope"] == "handler"


def test_policy_edit_that_is_not_an_object_is_400(client, operator):
    with nothing_written():
        refused(client.put("/internal/policies/default", json=[1], headers=operator), 400, "bad_request")


def test_unknown_policy_is_404(client, operator):
    refused(client.get("/internal/policies/nope", headers=operator), 404, "not_found")


# --- POST /events ---------------------------------------------------------------------------------------------


FAILED = "task.execution.failed"
UPDATED = "task.execution.updated"


@pytest.mark.parametrize(("payload", "status", "error", "field"), [
    pytest.param({"type": "task.execution.exploded", "idempotency_key": "k"}, 422, "invalid", "type",
                 id="unknown-type"),
    pytest.param({"idempotency_key": "k"}, 422, "invalid", "type", id="no-type"),
    pytest.param({"type": FAILED, "error_code": "boom"}, 422, "invalid", "idempotency_key", id="failed-without-key"),
    pytest.param({"type": FAILED, "idempotency_key": "k"}, 422, "invalid", "error_code", id="failed-without-code"),
    pytest.param({"type": FAILED, "idempotency_key": "k", "error_code": "boom", "retryable": "yes"}, 422, "invalid",
                 "retryable", id="retryable-a-string"),
    pytest.param({"type": FAILED, "idempotency_key": "k", "error_code": "boom", "retry_after_s": -1}, 422,
                 "invalid", "retry_after_s", id="negative-retry-after"),
    pytest.param({"type": FAILED, "idempotency_key": "k", "error_code": "boom"}, 404, "not_found", None,
                 id="unknown-key-and-no-handler"),
    pytest.param({"type": FAILED, "data": {"idempotency_key": "k", "error_code": "boom"}}, 404, "not_found", None,
                 id="unknown-key-nested-in-data"),
    pytest.param({"type": FAILED, "idempotency_key": "k", "error_code": "boom", "handler": "demo.nope"}, 422,
                 "invalid", "handler", id="unknown-key-and-unknown-handler"),
    pytest.param({"type": FAILED, "idempotency_key": "k", "error_code": "boom", "handler": 5}, 422,
                 "invalid", "handler", id="unknown-key-and-handler-not-a-string"),
    pytest.param({"type": FAILED, "idempotency_key": "k", "error_code": "boom", "handler": "demo.noop",
                  "params": [1]}, 422, "invalid", "params", id="unknown-key-and-params-a-list"),
    pytest.param({"type": FAILED, "idempotency_key": "k", "error_code": "boom", "handler": "demo.noop",
                  "retry_token": 5}, 422, "invalid", "retry_token", id="unknown-key-and-retry-token-not-a-string"),
    # A run a report creates keeps params as a submitted one does: 3.5 MB were kept (helper 152).
    pytest.param({"type": FAILED, "idempotency_key": "k", "error_code": "boom", "handler": "demo.noop",
                  "params": {"s": "x" * 70_000}}, 422, "invalid", "params", id="unknown-key-and-params-too-large"),
    pytest.param({"type": FAILED, "data": {"idempotency_key": "k", "error_code": "boom", "handler": "demo.noop",
                                           "params": {"s": "x" * 70_000}}}, 422, "invalid", "params",
                 id="params-too-large-nested-in-data"),

    pytest.param({"type": UPDATED, "idempotency_key": "k", "progress": 50}, 404, "not_found", None,
                 id="update-for-unknown-key"),
    pytest.param({"type": FAILED, "idempotency_key": "k", "error_code": "boom", "tenant": "nowhere"}, 422,
                 "invalid", "tenant", id="unknown-tenant"),
    pytest.param({"type": "order.created", "data": {"blob": "x" * 70_000}}, 422, "invalid", "data",
                 id="data-over-the-params-limit"),
    # Names no task can listen for (a task's event is checked the same way): each was a 202 that fired nothing.
    *(pytest.param({"type": name}, 422, "invalid", "type", id=f"type-{label}") for label, name in [
        ("capitals", "Order.Created"), ("spaces", " order.created "), ("too-long", "a" * 121),
        ("a-newline", "order.created\n"), ("empty", "")]),
    # A NUL anywhere in a body is the JSON reader's refusal, before any field is looked at.
    pytest.param({"type": "order.created\u0000"}, 400, "bad_json", None, id="type-a-nul"),
])
def test_bad_event_is_refused_and_records_nothing(client, operator, payload, status, error, field):
    with nothing_written():
        refused(client.post("/events", json=payload, headers=operator), status, error, field)


def test_a_report_naming_both_a_handler_and_a_task_is_refused_as_a_submit_is(client, operator):
    # The handler was dropped unsaid and the run made with the task's (helper 152); a submit with both is this 422.
    task = tasks.register(tenants.ensure_default(), {"name": "sync", "handler": "demo.sleep", "cron": "0 * * * *"},
                          Actor("seed"))
    with nothing_written():
        body = refused(client.post("/events", json={"type": FAILED, "idempotency_key": "k", "error_code": "boom",
                                                    "handler": "demo.noop", "task_id": task.id}, headers=operator),
                       422, "invalid", "handler")
    assert body["detail"] == "give exactly one of handler or task_id"


def test_a_reports_fields_beside_data_are_refused_by_name(client, operator):
    # The key beside `data` read "idempotency_key must be a string of 1-200 characters" (helper 97).
    with nothing_written():
        body = refused(client.post("/events", json={"type": FAILED, "idempotency_key": "k",
                                                    "data": {"error_code": "boom"}}, headers=operator),
                       422, "invalid", "idempotency_key")
    assert body["detail"] == "idempotency_key goes inside data with the report's other fields"
    with nothing_written():
        body = refused(client.post("/events", json={"type": FAILED, "data": {"error_code": "boom"}},
                                   headers=operator), 422, "invalid", "idempotency_key")
    assert body["detail"] == "idempotency_key is required: a string of 1-200 characters"


@pytest.mark.parametrize("payload, field", [
    # Misspelt, they were dropped: the failure was retried in a second, not after 600 s, and as retryable (helper 104).
    ({"type": FAILED, "idempotency_key": "k", "error_code": "http_429", "handler": "demo.noop", "retry_after": 600},
     "retry_after"),
    ({"type": FAILED, "data": {"idempotency_key": "k", "error_code": "boom", "handler": "demo.noop",
                               "retriable": False}}, "retriable"),
    ({"type": "task.execution.updated", "idempotency_key": "k", "progress": 5, "percent": 5}, "percent"),
])
def test_a_report_field_it_does_not_take_is_refused_by_name(client, operator, payload, field):
    with nothing_written():
        body = refused(client.post("/events", json=payload, headers=operator), 422, "invalid", field)
    assert body["detail"].startswith(f"unknown field {field!r}; allowed: ")


def test_a_replay_cancel_or_undo_retry_sent_a_body_refuses_it_by_name(client, operator, submitted):
    # Sent with params, a replay answered 202 and ran the old ones: the client believed them applied (helper 104).
    run_id = submitted(idempotency_key="job-body")
    for path in ("/api/dead-letters/1/replay", f"/worker/tasks/{run_id}/cancel", f"/worker/tasks/{run_id}/retry-undo"):
        with nothing_written():
            body = refused(client.post(path, json={"params": {"x": 1}}, headers=operator), 422, "invalid", "params")
        assert body["detail"].startswith("unknown field 'params'; this takes no body"), path
    assert "to change them, POST /api/dead-letters/1/fix" in client.post(
        "/api/dead-letters/1/replay", json={"params": {}}, headers=operator).json["detail"]


@pytest.mark.parametrize("progress", [101, -1, 50.5, True, "50"])
def test_progress_outside_0_to_100_is_422(client, operator, submitted, progress):
    submitted(idempotency_key="job-7")
    with nothing_written():
        body = refused(client.post("/events", json={"type": UPDATED, "idempotency_key": "job-7",
                                                    "progress": progress}, headers=operator),
                       422, "invalid", "progress")
    assert "0 to 100" in body["detail"]


def test_failure_reported_for_a_run_that_is_not_running_is_409(client, operator, submitted):
    run_id = submitted(idempotency_key="job-8")
    with nothing_written():
        refused(client.post("/events", json={"type": FAILED, "idempotency_key": "job-8", "error_code": "boom"},
                            headers=operator), 409, "conflict", "idempotency_key")
    assert db.session.execute(select(Run.status).where(Run.id == run_id)).scalar_one() == "pending"


def test_a_failure_report_sent_again_is_200_duplicate_and_changes_nothing(client, operator):
    report = {"type": FAILED, "idempotency_key": "ext-9", "error_code": "boom", "retryable": False,
              "handler": "demo.noop"}
    first = client.post("/events", json=report, headers=operator)
    assert (first.status_code, first.json["status"], first.json["duplicate"]) == (202, "dead", False)
    with nothing_written():
        again = client.post("/events", json=report, headers=operator)
    assert (again.status_code, again.json["id"], again.json["duplicate"]) == (200, first.json["id"], True)


def test_a_failure_report_for_a_key_of_other_work_is_409_and_a_key_with_a_newline_422(client, operator):
    report = {"type": FAILED, "idempotency_key": "ext-10", "error_code": "boom", "retryable": False,
              "handler": "demo.noop"}
    assert client.post("/events", json=report, headers=operator).status_code == 202
    with nothing_written():
        other = client.post("/events", json={**report, "handler": "demo.sleep"}, headers=operator)
        refused(other, 409, "conflict", "idempotency_key")  # it was a 200 "duplicate" of the demo.noop run
        refused(client.post("/events", json={**report, "handler": 5}, headers=operator), 422, "invalid", "handler")
        refused(client.post("/events", json={**report, "idempotency_key": "ext\n11"}, headers=operator), 422,
                "invalid", "idempotency_key")
        refused(client.post("/api/workflows", json={"name": "ship", "steps": [{"handler": "demo.noop"}],
                                                    "idempotency_key": "wf\u2028key"}, headers=operator),
                422, "invalid", "idempotency_key")


def test_a_task_id_names_its_tenant_and_a_value_that_is_no_id_says_so(client, auth, operator):
    """{"task_id": 11} of acme's task submits in acme (a task is one tenant's); `true` is no task id."""
    acme = make_tenant("acme")
    task = Task(tenant_id=acme.id, name="acme-sync", handler="python:demo.noop")
    db.session.add(task)
    db.session.commit()
    answer = client.post("/worker/tasks", json={"task_id": task.id}, headers=operator)
    assert answer.status_code == 202, answer.get_data(as_text=True)
    assert db.session.get(Run, answer.get_json()["id"]).tenant_id == acme.id
    globex = make_tenant("globex")
    scoped = bearer(auth.make_user("gil", "operator", tenant=globex))
    with nothing_written():
        named = refused(client.post("/worker/tasks", json={"task_id": task.id, "tenant": "default"},
                                    headers=operator), 422, "invalid", "task_id")
        assert named["detail"] == f"no task {task.id} in tenant default"  # a tenant named is the one it acts for
        not_an_id = refused(client.post("/worker/tasks", json={"task_id": True}, headers=operator),
                            422, "invalid", "task_id")
        assert not_an_id["detail"] == "task_id is a task's id, a whole number, not True"
        # A token of another tenant learns nothing of acme's task: it acts for its own tenant, which has none.
        hidden = refused(client.post("/worker/tasks", json={"task_id": task.id}, headers=scoped),
                         422, "invalid", "task_id")
        assert hidden["detail"] == f"no task {task.id} in tenant globex"
        # An id no live task has, from a token of every tenant: not "in tenant default", where nobody looked.
        gone = refused(client.post("/worker/tasks", json={"task_id": 99999}, headers=operator), 422, "invalid",
                       "task_id")
        assert gone["detail"] == "no task 99999: give the id of a task that exists"


def test_a_known_key_sent_for_other_work_is_a_409_not_the_other_runs_answer(client, operator):
    first = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "order-42"}, headers=operator)
    assert first.status_code == 202
    again = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "order-42",
                                               "params": {"retry": 2}}, headers=operator)
    assert again.status_code == 200 and again.get_json()["id"] == first.get_json()["id"]  # params may differ
    with nothing_written():
        other = refused(client.post("/worker/tasks", json={"handler": "demo.flaky", "idempotency_key": "order-42"},
                                    headers=operator), 409, "conflict", "idempotency_key")
    assert other["detail"] == (f"idempotency_key 'order-42' already names run {first.get_json()['id']}, of handler "
                               "python:demo.noop: send other work with a new key")


@pytest.mark.parametrize("path", ["/api/runs", "/api/work-orders", "/api/dead-letters", "/api/approvals",
                                  "/internal/tasks", "/ops/capacity/reservations", "/api/reports/summary",
                                  "/api/tenants", "/internal/policies", "/internal/templates",
                                  "/internal/quota-classes", "/api/runbooks", "/internal/alert-rules"])
def test_a_list_given_a_parameter_it_does_not_read_says_so_instead_of_listing_everything(client, auth, path):
    """/api/dead-letters?before=… (its cursor is `after`) answered the first page as if no cursor was given; a
    manager's /api/reports/summary?tenat=acme every tenant's figures as if they were acme's."""
    operator = bearer(auth.make_user("root", "admin"))
    answer = client.get(f"{path}?befor=5", headers=operator)
    assert answer.status_code == 422, answer.get_data(as_text=True)
    detail = answer.get_json()["detail"]
    assert answer.get_json()["field"] == "befor" and detail.startswith("unknown parameter 'befor'; ")
    takes_none = path in ("/api/tenants", "/internal/policies", "/internal/templates", "/internal/quota-classes",
                          "/api/runbooks", "/internal/alert-rules")
    assert detail.endswith("this list takes no query parameters" if takes_none else "")  # "allowed: " said nothing
    assert ("allowed: " in detail) is not takes_none
    assert client.get(path, headers=operator).status_code == 200


@pytest.mark.parametrize("path", ["/api/runs?status=dead&status=succeeded", "/api/runs?limit=10&limit=20",
                                  "/api/dead-letters?tenant=default&tenant=acme", "/api/approvals?status=a&status=b"])
def test_a_list_given_a_parameter_twice_says_so_instead_of_reading_the_first(client, auth, path):
    # ?status=dead&status=succeeded answered the dead runs alone: requests sends a list this way (helper 113).
    answer = client.get(path, headers=bearer(auth.make_user("root", "admin")))
    assert answer.status_code == 422, answer.get_data(as_text=True)
    name = path.split("?")[1].split("=")[0]
    assert answer.get_json()["field"] == name
    assert answer.get_json()["detail"] == f"{name} is given 2 times; this list reads one value of it: send it once"


def test_a_new_policy_is_201_with_its_location_and_a_new_version_200(client, operator):
    made = client.put("/internal/policies/nightly", json={"max_attempts": 3}, headers=operator)
    assert (made.status_code, made.headers["Location"]) == (201, "/internal/policies/nightly")
    assert client.get(made.headers["Location"], headers=operator).json["spec"]["max_attempts"] == 3
    again = client.put("/internal/policies/nightly", json={"max_attempts": 4}, headers=operator)
    assert again.status_code == 200 and "Location" not in again.headers


@pytest.mark.parametrize("path", ["/worker/tasks?tenant=globex", "/events?tenant=acme", "/api/workflows?dry_run=1"])
def test_a_writes_query_string_is_refused_not_dropped(client, operator, path):
    """POST /worker/tasks?tenant=globex made the run in the default tenant, unsaid (helper 152): a write reads its
    body only."""
    make_tenant("globex"), make_tenant("acme")
    with nothing_written():
        body = refused(client.post(path, json={"handler": "demo.noop", "type": "order.created"}, headers=operator),
                       422, "invalid", path.split("?")[1].split("=")[0])
    assert "takes no query parameters" in body["detail"] and "JSON body" in body["detail"]
