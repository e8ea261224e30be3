"""Quota classes over the API: list, read, create, update, delete; the task API sets and shows quota_class."""

import pytest

from console.models import AuditEntry, QuotaClass, Task
from tests import api_checks
from tests.factories import bearer, make_tenant

COUNTED = {"classes": QuotaClass, "tasks": Task, "audit": AuditEntry}
refused = api_checks.refused


@pytest.fixture
def operator(auth):
    return bearer(auth.make_user("svc", "operator"))


def test_a_class_is_created_read_updated_used_and_deleted_only_when_unused(client, operator):
    created = client.post("/internal/quota-classes", headers=operator,
                          json={"name": "heavy-etl", "max_running": 2, "description": "nightly ETL"})
    assert created.status_code == 201, created.json
    assert {k: created.json[k] for k in ("name", "max_running", "description")} == {
        "name": "heavy-etl", "max_running": 2, "description": "nightly ETL"}
    assert [c["name"] for c in client.get("/internal/quota-classes", headers=operator).json] == ["heavy-etl"]

    updated = client.put("/internal/quota-classes/heavy-etl", headers=operator, json={"max_running": 3})
    assert (updated.status_code, updated.json["max_running"], updated.json["description"]) == (200, 3, "nightly ETL")

    task = client.post("/internal/tasks/register", headers=operator, json={
        "name": "export", "handler": "demo.noop", "cron": "0 2 * * *", "template": None, "quota_class": "heavy-etl"})
    assert task.status_code == 201 and task.json["quota_class"] == "heavy-etl"
    with api_checks.nothing_written(COUNTED):
        body = refused(client.delete("/internal/quota-classes/heavy-etl", headers=operator), 409, "conflict", "name")
    assert "task default/export" in body["detail"]

    assert client.put(f"/internal/tasks/{task.json['id']}", headers=operator,
                      json={"quota_class": None}).status_code == 200
    deleted = client.delete("/internal/quota-classes/heavy-etl", headers=operator)
    assert deleted.status_code == 200 and deleted.json == {"name": "heavy-etl", "deleted": True}
    refused(client.get("/internal/quota-classes/heavy-etl", headers=operator), 404, "not_found")


def test_bad_input_is_a_clear_4xx_and_writes_nothing(client, operator):
    client.post("/internal/quota-classes", headers=operator, json={"name": "heavy-etl", "max_running": 2})
    with api_checks.nothing_written(COUNTED):
        refused(client.post("/internal/quota-classes", headers=operator, json={"name": "heavy-etl", "max_running": 1}),
                409, "conflict", "name")
        refused(client.post("/internal/quota-classes", headers=operator, json={"name": "x"}), 422, "invalid",
                "max_running")
        refused(client.post("/internal/quota-classes", headers=operator, json={"name": "x", "max_running": 0}),
                422, "invalid", "max_running")
        refused(client.post("/internal/quota-classes", headers=operator, json={"name": "a\u0000b", "max_running": 1}),
                400, "bad_json")
        refused(client.put("/internal/quota-classes/heavy-etl", headers=operator, json={"name": "other"}),
                422, "invalid", "name")
        refused(client.put("/internal/quota-classes/heavy-etl", headers=operator, json={"max_running": None}),
                422, "invalid", "max_running")
        refused(client.post("/internal/tasks/register", headers=operator, json={
            "name": "t", "handler": "demo.noop", "cron": "* * * * *", "quota_class": "ghost"}),
            422, "invalid", "quota_class")
        refused(client.post("/internal/templates", headers=operator, json={
            "name": "t", "rules": {"quota_class": "ghost"}}), 422, "invalid", "rules.quota_class")
        refused(client.get("/internal/quota-classes/a%00b", headers=operator), 404, "not_found")


def test_classes_are_shared_so_a_tenant_limited_token_reads_but_does_not_change_them(client, auth, operator):
    client.post("/internal/quota-classes", headers=operator, json={"name": "heavy-etl", "max_running": 2})
    acme = make_tenant("acme")
    scoped = bearer(auth.make_user("acme-ops", "operator", tenant=acme), tenant=acme)
    assert client.get("/internal/quota-classes/heavy-etl", headers=scoped).status_code == 200
    viewer = bearer(auth.make_user("reader", "viewer"))
    with api_checks.nothing_written(COUNTED):
        for headers in (scoped, viewer):
            refused(client.put("/internal/quota-classes/heavy-etl", headers=headers, json={"max_running": 9}),
                    403, "forbidden")
            refused(client.post("/internal/quota-classes", headers=headers, json={"name": "m", "max_running": 1}),
                    403, "forbidden")
            refused(client.delete("/internal/quota-classes/heavy-etl", headers=headers), 403, "forbidden")
