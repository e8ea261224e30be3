"""Hostile input never gets a 500: huge integers, deep JSON, lone surrogates, oversize bodies, odd crons."""

import io
import json
from urllib.parse import quote

import pytest

from console.models import (
    AuditEntry,
    ConflictTemplate,
    OutboxMessage,
    PolicyVersion,
    QuotaClass,
    RetryPolicyRecord,
    Run,
    RunEvent,
    Task,
    Tenant,
)
from tests import api_checks
from tests.factories import bearer

COUNTED = {"runs": Run, "run_events": RunEvent, "tasks": Task, "policies": RetryPolicyRecord,
           "policy_versions": PolicyVersion, "audit": AuditEntry, "outbox": OutboxMessage}
HUGE = "9" * 30


@pytest.fixture
def operator(auth):
    return bearer(auth.make_user("svc", "operator"))


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("path", [f"/worker/tasks/{HUGE}", f"/internal/tasks/{HUGE}", f"/api/dead-letters/{HUGE}",
                                  f"/worker/tasks/{2**63}", f"/api/dead-letters/{2**31}", f"/api/workflows/{2**31}"])
def test_an_id_too_large_for_any_row_is_a_404(client, operator, path):
    assert client.get(path, headers=operator).status_code == 404


@pytest.mark.parametrize("path", [f"/runs/?before={HUGE}", f"/tasks/?before={HUGE}", f"/dlq/?before={HUGE}",
                                  f"/audit/?before={HUGE}", f"/workorders/?before={HUGE}", f"/runs/{HUGE}",
                                  f"/tasks/{HUGE}", "/runs/?before=-5"])
def test_a_huge_number_in_a_page_address_is_not_a_500(client, auth, path):
    auth.as_role("operator")
    assert client.get(path).status_code in (200, 404, 422)  # the audit log says what to fix (422)


@pytest.mark.parametrize("value", ["abc", "-5", "0", "1.5", HUGE])
@pytest.mark.parametrize("path", ["/runs", "/tasks", "/dlq/", "/workorders", "/approvals", "/approvals/mine",
                                  "/runs/workflows", "/reports/breaches", "/policies/default"])
def test_a_page_address_whose_before_names_no_row_is_a_422_saying_so(client, auth, path, value):
    # It used to show the newest page as if it were the one asked for (a cut or mistyped link).
    auth.as_role("admin")
    response = client.get(f"{path}?before={value}")
    assert response.status_code == 422, path
    assert "is not a row id (a whole number from 1): drop it from the address" in response.get_data(as_text=True)


@pytest.mark.parametrize("payload", [{"run_id": 10**30}, {"run_id": -(10**30)}, {"run_id": 2**31}])
def test_a_huge_json_id_is_refused_clearly(client, operator, payload):
    with api_checks.nothing_written(COUNTED):
        response = client.post("/internal/tasks/retry", json=payload, headers=operator)
    assert response.status_code in (404, 422), response.get_data(as_text=True)


@pytest.mark.parametrize("path", ["/worker/tasks", "/events", "/internal/tasks/register", "/internal/tasks/retry"])
def test_json_nested_a_thousand_deep_is_a_clear_400(client, operator, path):
    body = '{"handler": "demo.noop", "params": {"a": ' + deep(1000) + "}}"
    with api_checks.nothing_written(COUNTED):
        response = client.post(path, data=body, content_type="application/json", headers=operator)
    api_checks.refused(response, 400, "bad_json")
    assert "nested" in response.json["detail"]


def test_json_nested_past_the_limit_but_parseable_is_refused_before_anything_walks_it(client, operator):
    body = '{"handler": "demo.noop", "params": {"a": ' + deep(100) + "}}"
    with api_checks.nothing_written(COUNTED):
        response = client.post("/worker/tasks", data=body, content_type="application/json", headers=operator)
    assert "64 levels" in api_checks.refused(response, 400, "bad_json")["detail"]


@pytest.mark.parametrize("path, body", [
    ("/worker/tasks", '{"handler": "demo.noop", "idempotency_key": "k-\\ud800"}'),
    ("/events", '{"type": "\\udfff", "data": {}}'),
    ("/internal/policies/surrogate", '{"description": "x\\ud83d", "max_attempts": 3}'),
    ("/worker/tasks", '{"handler": "demo.noop", "params": {"\\ud800": 1}}'),
])
def test_a_lone_surrogate_anywhere_in_json_is_a_clear_400(client, operator, path, body):
    method = client.put if path.startswith("/internal/policies") else client.post
    with api_checks.nothing_written(COUNTED):
        response = method(path, data=body, content_type="application/json", headers=operator)
    assert "Unicode" in api_checks.refused(response, 400, "bad_json")["detail"]


@pytest.mark.parametrize("path, body", [
    ("/worker/tasks", '{"handler": "demo.noop", "params": {"n": NaN}}'),
    ("/worker/tasks", '{"handler": "demo.noop", "params": {"deep": [{"m": -Infinity}]}}'),
    ("/worker/tasks", '{"handler": "demo.noop", "params": {"n": 1e999999}}'),
    ("/events", '{"type": "order.paid", "data": {"amount": Infinity}}'),
    ("/events", '{"type": "task.execution.failed", "data": {"idempotency_key": "ext", "retry_after_s": NaN}}'),
])
def test_a_number_json_cannot_carry_is_a_clear_400(client, operator, path, body):
    """Python's decoder reads NaN and Infinity; stored, they would make the API's answers invalid JSON."""
    with api_checks.nothing_written(COUNTED):
        response = client.post(path, data=body, content_type="application/json", headers=operator)
    assert "not finite" in api_checks.refused(response, 400, "bad_json")["detail"]


@pytest.mark.parametrize("path, body, key", [
    ("/worker/tasks", '{"handler": "demo.noop", "idempotency_key": "a", "idempotency_key": "b"}', "idempotency_key"),
    ("/worker/tasks", '{"handler": "demo.noop", "params": {"deep": {"n": 1, "n": 2}}}', "n"),
    ("/events", '{"type": "order.paid", "type": "order.refunded", "data": {}}', "type"),
])
def test_a_key_given_twice_in_one_object_is_a_clear_400(client, operator, path, body, key):
    """Python keeps the last of two, other readers the first: which run the client meant is a guess."""
    with api_checks.nothing_written(COUNTED):
        response = client.post(path, data=body, content_type="application/json", headers=operator)
    detail = api_checks.refused(response, 400, "bad_json")["detail"]
    assert detail == f"the key '{key}' is given twice in one object: give it once"


@pytest.mark.parametrize("path", ["/worker/tasks", "/events"])
def test_a_number_with_more_digits_than_python_reads_is_said_to_be_one(client, operator, path):
    """Valid JSON, which Python refuses to turn into an int: not "the body is not valid JSON"."""
    huge = "9" * 5000
    body = f'{{"handler": "demo.noop", "type": "order.paid", "params": {{"n": {huge}}}, "data": {{"n": {huge}}}}}'
    with api_checks.nothing_written(COUNTED):
        response = client.post(path, data=body, content_type="application/json", headers=operator)
    assert "a number in the JSON has more than 4,300 digits" in api_checks.refused(response, 400, "bad_json")["detail"]


def test_a_body_over_the_limit_is_a_413_naming_it(app, client, operator):
    app.config["MAX_CONTENT_LENGTH"] = 10_000
    with api_checks.nothing_written(COUNTED):
        response = client.post("/worker/tasks", json={"handler": "demo.noop", "params": {"x": "y" * 20_000}},
                               headers=operator)
    body = api_checks.refused(response, 413, "request_entity_too_large")
    assert "10,000 bytes" in body["detail"] and "REBOUND_MAX_BODY_BYTES" in body["detail"]


def test_params_past_their_cap_are_a_422(client, operator):
    with api_checks.nothing_written(COUNTED):
        response = client.post("/worker/tasks", json={"handler": "demo.noop", "params": {"x": "y" * 70_000}},
                               headers=operator)
    assert "at most 65,536" in api_checks.refused(response, 422, "invalid", "params")["detail"]


def test_a_wrong_method_is_a_405_that_says_which_ones_work(client, operator):
    response = client.delete("/worker/tasks", headers=operator)
    assert response.status_code == 405
    assert set(response.headers["Allow"].split(", ")) >= {"POST"}
    assert response.json["detail"] == "DELETE is not taken at /worker/tasks: it takes POST"
    # Runs are read under /api and submitted under /worker: the answer said only "not allowed" (helper 98).
    submitted_at_reads = client.post("/api/runs", json={"handler": "demo.noop"}, headers=operator)
    assert submitted_at_reads.status_code == 405 and submitted_at_reads.json["detail"] == (
        "POST is not taken at /api/runs: it takes GET; submit a run with POST /worker/tasks")


def test_a_body_sent_without_its_length_is_refused_saying_to_send_it(app, client, operator):
    """Chunked: WSGI reads no body of unknown length, so the API asks for the length instead of misreading it."""
    app.config["MAX_CONTENT_LENGTH"] = 10_000
    data = json.dumps({"handler": "demo.noop", "params": {"x": "y" * 20_000}}).encode()
    for path in ("/worker/tasks", "/worker/tasks/batch"):  # the batch reads its body its own way: the same answer
        with api_checks.nothing_written(COUNTED):
            response = client.post(path, input_stream=io.BytesIO(data), content_type="application/json",
                                   headers={**operator, "Transfer-Encoding": "chunked"})
        said = api_checks.refused(response, 411, "length_required")["detail"]
        assert "send the body with its Content-Length, not chunked; at most 10,000 bytes" in said, path


@pytest.mark.parametrize("data, code, said", [
    (b'{"handler": "demo.noop", "params": {"x": "\xff\xfe"}}', "bad_json", "not valid JSON"),
    (b'{"handler": "demo.noop",', "bad_json", "not valid JSON"),
    (b'["demo.noop"]', "bad_request", "not an array, a string or a number"),
])
def test_a_body_that_is_no_json_object_says_what_it_is(client, operator, data, code, said):
    """Not "send a JSON object with Content-Type: application/json" to a request that has that Content-Type."""
    with api_checks.nothing_written(COUNTED):
        response = client.post("/worker/tasks", data=data, content_type="application/json", headers=operator)
    assert said in api_checks.refused(response, 400, code)["detail"]


@pytest.mark.parametrize("retry_after", [1e300, 10**40, 31 * 24 * 3600])  # NaN: a 400 before, as JSON can't hold it
def test_a_reported_retry_after_past_30_days_is_a_422(client, operator, retry_after):
    submitted = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "ext"}, headers=operator)
    assert submitted.status_code == 202
    body = {"type": "task.execution.failed", "data": {"idempotency_key": "ext", "error_code": "x",
                                                      "retry_after_s": retry_after}}
    response = client.post("/events", json=body, headers=operator)
    api_checks.refused(response, 422, "invalid", "retry_after_s")


@pytest.mark.parametrize("fields, field", [
    ({"cron": "*/90 * * * *"}, "cron"), ({"cron": "*/" + "9" * 5000 + " * * * *"}, "cron"),
    ({"cron": "0 3 * * *", "timezone": "localtime"}, "timezone"),
    ({"cron": "0 3 * * *", "timezone": "posixrules"}, "timezone"),
    ({"cron": "0 3 * * *", "timezone": "Factory"}, "timezone"),
])
def test_odd_crons_and_zones_that_are_not_iana_are_refused(client, operator, fields, field):
    with api_checks.nothing_written(COUNTED):
        response = client.post("/internal/tasks/register", json={"name": "nightly", "handler": "demo.noop", **fields},
                               headers=operator)
    api_checks.refused(response, 422, "invalid", field)


@pytest.mark.parametrize("field, value", [
    (field, value) for field in ("params", "timezone", "event", "cron", "quota_class", "mutex_key")
    for value in (0, False, [], {} if field != "params" else [])])
def test_a_wrong_typed_empty_looking_value_is_refused_not_taken_for_none(client, operator, field, value):
    """{"params": 0} cleared a task's params, {"timezone": 0} put it back on UTC, {"cron": false} unscheduled it and
    {"event": []} dropped its trigger, each a 200 (helper 165): only null (or "" for a text) clears a field."""
    defined = {"name": "nightly", "handler": "demo.noop", "cron": "0 4 * * *", "timezone": "Europe/Paris",
               "event": "order.created", "params": {"account": 42}, "mutex_key": "ledger"}
    task = client.post("/internal/tasks/register", json=defined, headers=operator)
    assert task.status_code == 201, task.get_json()
    with api_checks.nothing_written(COUNTED):
        response = client.put(f"/internal/tasks/{task.get_json()['id']}", json={field: value}, headers=operator)
    api_checks.refused(response, 422, "invalid", field)
    with api_checks.nothing_written(COUNTED):
        response = client.post("/internal/tasks/register", json={**defined, "name": "other", field: value},
                               headers=operator)
    api_checks.refused(response, 422, "invalid", field)


NUL = "a\u0000b"


@pytest.mark.parametrize(("path", "body"), [
    ("/worker/tasks", {"handler": "demo.noop", "tenant": NUL}),
    ("/worker/tasks", {"handler": NUL}),
    ("/worker/tasks", {"handler": "demo.noop", "policy": NUL}),
    ("/worker/tasks", {"handler": "demo.noop", "idempotency_key": NUL}),
    ("/worker/tasks/batch", {"runs": [{"handler": "demo.noop", "tenant": NUL}, {"handler": NUL}]}),
    ("/api/workflows", {"name": "w", "tenant": NUL, "steps": [{"handler": "demo.noop"}]}),
    ("/api/workflows", {"name": NUL, "steps": [{"handler": NUL}]}),
])
def test_a_nul_in_a_name_is_refused_not_a_500(client, operator, path, body):
    # PostgreSQL refuses a NUL in a bound string: it must be answered before it gets there (schemathesis found it).
    response = client.post(path, json=body, headers=operator)
    assert response.status_code < 500, response.get_data(as_text=True)


# Names no tenant, policy, template or quota class can have: a NUL, 10,000 characters, a trailing newline (which
# `$` in a pattern lets through). Each route that takes such a name answers 4xx and writes nothing.
BAD_NAMES = {"nul": NUL, "10k": "n" * 10_000, "newline": "nightly\n"}
NAMED_API = [
    ("get", "/internal/policies/{}", None), ("put", "/internal/policies/{}", {"max_attempts": 3}),
    ("get", "/internal/templates/{}", None), ("put", "/internal/templates/{}", {"rules": {}}),
    ("post", "/internal/templates/{}/preview", {}), ("delete", "/internal/templates/{}", None),
    ("get", "/internal/quota-classes/{}", None), ("put", "/internal/quota-classes/{}", {"max_running": 2}),
    ("delete", "/internal/quota-classes/{}", None), ("put", "/api/tenants/{}", {"max_running": 2}),
]
NAMED_IN_BODY = [
    ("/internal/templates", {"name": "{}"}), ("/internal/quota-classes", {"name": "{}", "max_running": 2}),
    ("/api/tenants", {"name": "{}"}),
    ("/internal/tasks/register", {"name": "t", "handler": "demo.noop", "cron": "0 3 * * *", "template": "{}"}),
    ("/internal/tasks/register", {"name": "t", "handler": "demo.noop", "cron": "0 3 * * *", "policy": "{}"}),
    ("/internal/tasks/register", {"name": "t", "handler": "demo.noop", "cron": "0 3 * * *", "quota_class": "{}"}),
    ("/worker/tasks", {"handler": "demo.noop", "tenant": "{}"}),
]
NAMED_PAGES = [
    ("get", "/policies/{}"), ("post", "/policies/{}"), ("get", "/tasks/templates/{}"),
    ("post", "/tasks/templates/{}"), ("post", "/tasks/templates/{}/delete"), ("post", "/tasks/quota-classes/{}"),
    ("post", "/tasks/quota-classes/{}/delete"), ("post", "/admin/tenants/{}"),
]
NAMED_COUNTED = {**COUNTED, "templates": ConflictTemplate, "quota_classes": QuotaClass, "tenants": Tenant}


@pytest.fixture
def admin_token(auth):
    return bearer(auth.make_user("root", "admin"))


@pytest.mark.parametrize("kind", BAD_NAMES)
@pytest.mark.parametrize(("method", "path", "body"), NAMED_API)
def test_a_name_no_row_can_hold_in_an_address_is_a_4xx(client, admin_token, kind, method, path, body):
    with api_checks.nothing_written(NAMED_COUNTED):
        response = getattr(client, method)(path.format(quote(BAD_NAMES[kind], safe="")), json=body,
                                           headers=admin_token)
    assert 400 <= response.status_code < 500, response.get_data(as_text=True)[:300]


@pytest.mark.parametrize(("kind", "path", "body"), [
    # A tenant's name is trimmed first (a form's stray newline): "nightly\n" creates tenant nightly, rightly.
    (kind, path, body) for kind in BAD_NAMES for path, body in NAMED_IN_BODY
    if (kind, path) != ("newline", "/api/tenants")])
def test_a_name_no_row_can_hold_in_a_body_is_a_4xx(client, admin_token, kind, path, body):
    sent = {key: BAD_NAMES[kind] if value == "{}" else value for key, value in body.items()}
    with api_checks.nothing_written(NAMED_COUNTED):
        response = client.post(path, json=sent, headers=admin_token)
    assert 400 <= response.status_code < 500, response.get_data(as_text=True)[:300]


@pytest.mark.parametrize("kind", BAD_NAMES)
@pytest.mark.parametrize(("method", "path"), NAMED_PAGES)
def test_a_name_no_row_can_hold_in_a_page_address_is_a_4xx(client, auth, kind, method, path):
    auth.as_role("admin")
    address = path.format(quote(BAD_NAMES[kind], safe=""))
    data = {"csrf_token": auth.csrf("/overview"), "max_running": "2", "max_queued": "5", "max_attempts": "3"}
    with api_checks.nothing_written(NAMED_COUNTED):
        response = client.get(address) if method == "get" else client.post(address, data=data)
    assert 400 <= response.status_code < 500, response.get_data(as_text=True)[:300]


# Free text a person writes (descriptions, reasons, notes): PostgreSQL refused the NUL in the column, a 500 (an
# auditor's walk on PostgreSQL). Refused anywhere in a body, a form, a query or the path, before any view runs.
NUL_BODIES = [
    ("put", "/internal/policies/nulpol", {"description": NUL}),
    ("post", "/internal/quota-classes", {"name": "nulqc", "max_running": 2, "description": NUL}),
    ("post", "/internal/templates", {"name": "nultpl", "description": NUL}),
    ("post", "/ops/capacity/reserve", {"tenant": "default", "start": "2030-01-01T00:00:00Z",
                                       "end": "2030-01-01T01:00:00Z", "running_slots": 1, "reason": NUL}),
    ("post", "/worker/tasks", {"handler": "demo.noop", "params": {"note": NUL}}),
    ("post", "/worker/tasks", {"handler": "demo.noop", "params": {NUL: 1}}),
]


@pytest.mark.parametrize(("method", "path", "body"), NUL_BODIES)
def test_a_nul_anywhere_in_a_json_body_is_a_clear_400(client, admin_token, method, path, body):
    with api_checks.nothing_written(NAMED_COUNTED):
        response = getattr(client, method)(path, json=body, headers=admin_token)
    answer = api_checks.refused(response, 400, "bad_json")
    assert "contains a NUL character (\\u0000), which Rebound does not store" in answer["detail"]


def test_a_nul_in_a_form_field_or_a_query_is_a_clear_400(client, auth):
    auth.as_role("admin")
    data = {"csrf_token": auth.csrf("/overview"), "max_running": "2", "max_queued": "5", "max_attempts": "3",
            "description": NUL}
    with api_checks.nothing_written(NAMED_COUNTED):
        response = client.post("/policies/nulpol", data=data)
    assert response.status_code == 422
    assert "description contains a NUL character (\\u0000), which Rebound does not store" in (
        response.get_data(as_text=True))
    assert client.get(f"/audit/?actor={quote(NUL)}").status_code == 422


def test_a_handler_name_past_its_column_is_refused_without_echoing_it(client, operator):
    with api_checks.nothing_written(COUNTED):
        response = client.post("/worker/tasks", json={"handler": "x" * 100_000}, headers=operator)
    body = api_checks.refused(response, 422, "invalid", "handler")
    assert "handler is at most 120 characters" in body["detail"] and "100,000" in body["detail"]
    assert len(response.get_data()) < 500


@pytest.mark.parametrize("path", ["/api/approvals?limit=٣", "/api/dead-letters?limit=٣"])
def test_digits_of_other_scripts_are_no_number(client, operator, path):
    """int() reads "٣" as 3; a query that takes a number takes ASCII digits only, as people and clients send."""
    assert client.get(path, headers=operator).status_code == 422


def test_a_tenant_quota_in_other_digits_is_refused(client, admin_token):
    response = client.put("/api/tenants/default", json={"max_running": "٣"}, headers=admin_token)
    assert response.status_code == 422 and "max_running must be a whole number" in response.get_json()["detail"]


@pytest.mark.parametrize(("path", "data", "said"), [
    ("/tasks/quota-classes/", {"name": "qcbig", "max_running": "1" + "0" * 400}, "how many may run at once"),
    # Refused back to the list it came from, the rule in its flash.
    ("/dlq/bulk/replay", {"id": "1", "rate": "1" + "0" * 400, "action": "replay"}, "from 1 to 1000"),
])
def test_a_number_past_a_floats_range_in_a_form_is_refused_not_a_500(client, auth, path, data, said):
    """WTForms' NumberRange calls math.isnan on an int: 400 digits raised OverflowError, a 500."""
    auth.as_role("admin")
    with api_checks.nothing_written(COUNTED):
        response = client.post(path, data={**data, "csrf_token": auth.csrf("/overview")}, follow_redirects=True)
    assert response.status_code == (422 if "quota" in path else 200)
    assert said in response.get_data(as_text=True)
