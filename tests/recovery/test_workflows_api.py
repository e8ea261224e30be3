"""POST /api/workflows and GET /api/workflows/{id}: submitted as a unit, read back by step, behind the tenant wall."""

import jsonschema
import pytest
import referencing
import referencing.jsonschema

from console.models import AuditEntry, Run, RunEvent, Workflow, WorkflowStep
from tests import api_checks
from tests.factories import OK, bearer, make_tenant, three_steps

COUNTED = {"workflows": Workflow, "steps": WorkflowStep, "runs": Run, "run_events": RunEvent, "audit": AuditEntry}


def body(**overrides) -> dict:
    return {"name": "ship order 7", "steps": three_steps(), "idempotency_key": "order-7", **overrides}


@pytest.fixture
def operator(auth):
    return bearer(auth.make_user("otto", "operator"))


def test_a_workflow_is_submitted_as_one_unit_and_read_back_by_step(client, operator, saga):
    response = client.post("/api/workflows", headers=operator, json=body())
    assert response.status_code == 202
    workflow_id = response.get_json()["id"]
    assert response.get_json() == {"id": workflow_id, "status": "running", "created": True}
    saga.execute(workflow_id, 1)

    shown = client.get(f"/api/workflows/{workflow_id}", headers=operator).get_json()
    assert (shown["id"], shown["status"], shown["name"], shown["tenant"]) == (
        workflow_id, "running", "ship order 7", "default")
    first = saga.run(workflow_id, 1)
    assert [(s["index"], s["run_id"], s["status"], s["compensation_status"]) for s in shown["steps"]] == [
        (1, first.id, "succeeded", None), (2, None, "not_started", None), (3, None, "not_started", None)]
    assert shown["steps"][0]["handler"] == "python:demo.flaky_compensated"

    again = client.post("/api/workflows", headers=operator, json=body())  # a client's retry
    assert again.status_code == 200 and again.get_json() == {"id": workflow_id, "status": "running",
                                                             "created": False}
    other = client.post("/api/workflows", headers=operator, json=body(name="typo"))  # the key reused for other work
    assert "submitted with another name or other steps" in api_checks.refused(other, 409, "conflict",
                                                                               "idempotency_key")["detail"]


def test_a_compensated_workflow_shows_each_steps_undo(client, operator, saga):
    workflow_id = client.post("/api/workflows", headers=operator, json=body()).get_json()["id"]
    for position in (1, 2, 3):
        saga.execute(workflow_id, position)
        saga.advance(workflow_id)
    saga.undo(workflow_id, 2)
    saga.advance(workflow_id)
    saga.undo(workflow_id, 1)
    saga.advance(workflow_id)
    shown = client.get(f"/api/workflows/{workflow_id}", headers=operator).get_json()
    assert (shown["status"], shown["failed_step"]) == ("compensated", 3)
    assert [(s["status"], s["compensation_status"], s["compensation_attempts"]) for s in shown["steps"]] == [
        ("compensated", "compensated", 1), ("compensated", "compensated", 2), ("dead", None, 0)]


@pytest.mark.parametrize(("changes", "field"), [
    ({"steps": []}, "steps"),
    ({"steps": [{"handler": "demo.noop"}] * 21}, "steps"),
    ({"steps": [{"handler": "demo.nope"}]}, "steps[0].handler"),
    ({"steps": [{"handler": "demo.noop"}, {"handler": "demo.noop", "params": "x=1"}]}, "steps[1].params"),
    ({"steps": [{"handler": "demo.noop", "policy": {"max_attempts": "many"}}]}, "steps[0].policy.max_attempts"),
    ({"steps": None}, "steps"),
    ({"name": ""}, "name"),
    ({"name": "x" * 121}, "name"),
    ({"name": "\u200b\u200b"}, "name"),  # shows nothing: listed as a workflow with no name
    ({"idempotency_key": None}, "idempotency_key"),
    ({"idempotency_key": 7}, "idempotency_key"),
    ({"idempotency_key": "   "}, "idempotency_key"),  # spaces only: every client's "   " named one workflow
    ({"idempotency_key": "\u200b"}, "idempotency_key"),  # a zero-width space shows nothing either
    ({"priority": 1}, "priority"),
    ({"tenant": 3}, "tenant"),
])
def test_bad_input_is_a_422_naming_the_field_and_writes_nothing(client, operator, changes, field):
    request = {key: value for key, value in body(**changes).items() if value is not None or key == "steps"}
    with api_checks.nothing_written(COUNTED):
        api_checks.refused(client.post("/api/workflows", headers=operator, json=request), 422, "invalid", field)


def test_a_body_that_is_not_an_object_is_a_400(client, operator):
    with api_checks.nothing_written(COUNTED):
        api_checks.refused(client.post("/api/workflows", headers=operator, json=[body()]), 400, "bad_request")


def test_the_tenant_wall_holds_for_a_scoped_token(client, auth, saga):
    acme = make_tenant("acme")
    scoped = bearer(auth.make_user("ann", "admin", tenant=acme), tenant=acme)
    with api_checks.nothing_written(COUNTED):
        api_checks.refused(client.post("/api/workflows", headers=scoped, json=body(tenant="default")), 403,
                           "forbidden", "tenant")
    own = client.post("/api/workflows", headers=scoped, json=body())
    assert own.status_code == 202
    assert client.get(f"/api/workflows/{own.get_json()['id']}", headers=scoped).get_json()["tenant"] == "acme"
    others = saga.submit(three_steps(), key="order-8")
    api_checks.refused(client.get(f"/api/workflows/{others}", headers=scoped), 404, "not_found")
    # The same key in another tenant is another workflow.
    assert client.post("/api/workflows", headers=scoped, json=body(idempotency_key="order-8")).status_code == 202


def test_a_viewer_reads_but_cannot_submit(client, auth, saga):
    viewer = bearer(auth.make_user("vic", "viewer"))
    workflow_id = saga.submit(three_steps())
    assert client.get(f"/api/workflows/{workflow_id}", headers=viewer).status_code == 200
    with api_checks.nothing_written(COUNTED):
        api_checks.refused(client.post("/api/workflows", headers=viewer, json=body(idempotency_key="k2")), 403,
                           "forbidden")
    assert client.post("/api/workflows", json=body()).status_code == 401


def test_workflows_are_listed_newest_first_filtered_and_paged_within_the_tenant_wall(client, auth, saga):
    """There was no way to list them over the API: a client knew a workflow only by the id its submit answered."""
    acme = make_tenant("acme")
    first = saga.submit(three_steps(), key="order-1", name="ship order 1")
    second = saga.submit(three_steps(), key="order-2", name="refund order 2")
    theirs = saga.submit(three_steps(), key="order-3", name="ship order 3", tenant="acme")
    viewer = bearer(auth.make_user("vic", "viewer"))
    listed = client.get("/api/workflows", headers=viewer).get_json()
    assert [entry["id"] for entry in listed["workflows"]] == [theirs, second, first]
    assert listed["next_before"] is None and "steps" not in listed["workflows"][0]
    one = client.get(f"/api/workflows/{second}", headers=viewer).get_json()
    assert listed["workflows"][1] == {key: value for key, value in one.items() if key != "steps"}
    page = client.get("/api/workflows?limit=2", headers=viewer).get_json()
    assert [entry["id"] for entry in page["workflows"]] == [theirs, second] and page["next_before"] == second
    rest = client.get(f"/api/workflows?limit=2&before={second}", headers=viewer).get_json()
    assert [entry["id"] for entry in rest["workflows"]] == [first] and rest["next_before"] is None
    # A last page exactly full says it is the last: its cursor led to an empty page (helper 163).
    whole = client.get("/api/workflows?limit=3", headers=viewer).get_json()
    assert len(whole["workflows"]) == 3 and whole["next_before"] is None
    by_name = client.get("/api/workflows?q=SHIP&tenant=default", headers=viewer).get_json()["workflows"]
    assert [entry["id"] for entry in by_name] == [first]
    assert client.get("/api/workflows?status=compensated", headers=viewer).get_json()["workflows"] == []
    scoped = bearer(auth.make_user("ann", "viewer", tenant=acme), tenant=acme)
    assert [entry["id"] for entry in client.get("/api/workflows", headers=scoped).get_json()["workflows"]] == [theirs]
    api_checks.refused(client.get("/api/workflows?tenant=default", headers=scoped), 403, "forbidden", "tenant")
    api_checks.refused(client.get("/api/workflows?status=lost", headers=viewer), 422, "invalid", "status")
    api_checks.refused(client.get("/api/workflows?colour=red", headers=viewer), 422, "invalid", "colour")
    api_checks.refused(client.get("/api/workflows?limit=0", headers=viewer), 422, "invalid", "limit")


def test_a_workflow_stopped_at_a_step_left_for_a_person_reads_so_as_the_document_says(client, operator, saga):
    """Its error's severity 3 left step 2 for a person: the workflow stops there, step 1 not undone, and the answer
    is one the OpenAPI document's Workflow schema takes (its undo statuses are an enum a client may check)."""
    held = {"fail_times": 9, "error": "compensable", "severity": 3}
    steps = [{"handler": "demo.flaky_compensated", "params": OK}, {"handler": "demo.flaky_compensated", "params": held}]
    workflow_id = client.post("/api/workflows", headers=operator, json=body(steps=steps)).get_json()["id"]
    saga.execute(workflow_id, 1)
    saga.advance(workflow_id)
    saga.execute(workflow_id, 2)
    saga.advance(workflow_id)
    shown = client.get(f"/api/workflows/{workflow_id}", headers=operator).get_json()
    assert (shown["status"], shown["current_step"], shown["failed_step"]) == ("compensation_failed", 2, 2)
    assert [(s["status"], s["compensation_status"]) for s in shown["steps"]] == [
        ("succeeded", "not_attempted"), ("dead", "manual_intervention")]
    document = client.get("/openapi.json").get_json()
    resource = referencing.Resource.from_contents(document, default_specification=referencing.jsonschema.DRAFT202012)
    validator = jsonschema.Draft202012Validator({"$ref": "urn:rebound#/components/schemas/Workflow"},
                                                registry=referencing.Registry().with_resource("urn:rebound", resource))
    assert list(validator.iter_errors(shown)) == []
