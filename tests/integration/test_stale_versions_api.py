"""A PUT naming the version it was made from is refused (409, nothing written) when someone saved another meanwhile."""

import pytest

from console.models import AuditEntry, ConflictTemplate, ConflictTemplateVersion, PolicyVersion, RetryPolicyRecord, Task
from tests import api_checks
from tests.factories import bearer

COUNTED = {"policies": RetryPolicyRecord, "policy_versions": PolicyVersion, "templates": ConflictTemplate,
           "template_versions": ConflictTemplateVersion, "tasks": Task, "audit": AuditEntry}
refused = api_checks.refused


@pytest.fixture
def operator(auth):
    return bearer(auth.make_user("svc", "operator"))


@pytest.fixture
def colleague(auth):
    return bearer(auth.make_user("pat", "operator"))


def test_a_policy_put_over_a_version_saved_meanwhile_is_409_naming_who_saved_which(client, operator, colleague):
    created = client.put("/internal/policies/mail", json={"max_attempts": 3}, headers=operator)
    assert created.status_code == 201 and created.json["version"] == 1
    theirs = client.put("/internal/policies/mail", json={"max_attempts": 4, "base_version": 1}, headers=colleague)
    assert theirs.status_code == 200 and theirs.json["version"] == 2
    with api_checks.nothing_written(COUNTED):
        body = refused(client.put("/internal/policies/mail", json={"max_attempts": 7, "base_version": 1},
                                  headers=operator), 409, "stale_version", "base_version")
    assert body["detail"].startswith("pat (token ") and "saved version 2 while you edited version 1" in body["detail"]
    assert "nothing was saved" in body["detail"] and "base_version 2" in body["detail"]
    assert body["current_version"] == 2 and body["saved_by"].startswith("pat (token ")
    assert client.get("/internal/policies/mail", headers=operator).json["spec"]["max_attempts"] == 4
    mine = client.put("/internal/policies/mail", json={"max_attempts": 7, "base_version": 2}, headers=operator)
    assert mine.status_code == 200 and (mine.json["version"], mine.json["spec"]["max_attempts"]) == (3, 7)
    # Left out, the save replaces whatever is in force, as before.
    blind = client.put("/internal/policies/mail", json={"max_attempts": 8}, headers=colleague)
    assert blind.status_code == 200 and blind.json["version"] == 4


def test_a_template_put_over_a_version_saved_meanwhile_is_409_naming_who_saved_which(client, operator, colleague):
    assert client.post("/internal/templates", json={"name": "nightly"}, headers=operator).status_code == 201
    theirs = client.put("/internal/templates/nightly", headers=colleague,
                        json={"rules": {"concurrency_policy": "forbid"}, "base_version": 1})
    assert theirs.status_code == 200 and theirs.json["version"] == 2
    with api_checks.nothing_written(COUNTED):
        body = refused(client.put("/internal/templates/nightly", headers=operator,
                                  json={"rules": {"mutex_key": "ledger"}, "base_version": 1}),
                       409, "stale_version", "base_version")
    assert "saved version 2 while you edited version 1" in body["detail"] and body["current_version"] == 2
    rules = client.get("/internal/templates/nightly", headers=operator).json["rules"]
    assert (rules["mutex_key"], rules["concurrency_policy"]) == (None, "forbid")
    mine = client.put("/internal/templates/nightly", headers=operator,
                      json={"rules": {"mutex_key": "ledger"}, "base_version": 2})
    assert mine.status_code == 200 and mine.json["version"] == 3
    assert (mine.json["rules"]["mutex_key"], mine.json["rules"]["concurrency_policy"]) == ("ledger", "forbid")


@pytest.mark.parametrize("value", ["1", True, 0, -1, 1.5, 2**31, [1], {"v": 1}])
def test_a_base_version_that_is_not_a_version_number_is_422(client, operator, value):
    client.post("/internal/templates", json={"name": "nightly"}, headers=operator)
    with api_checks.nothing_written(COUNTED):
        refused(client.put("/internal/policies/default", json={"max_attempts": 9, "base_version": value},
                           headers=operator), 422, "invalid", "base_version")
        refused(client.put("/internal/templates/nightly", json={"rules": {}, "base_version": value},
                           headers=operator), 422, "invalid", "base_version")


def test_a_base_version_for_a_policy_that_does_not_exist_is_409_and_creates_nothing(client, operator):
    with api_checks.nothing_written(COUNTED):
        body = refused(client.put("/internal/policies/fresh", json={"base_version": 1}, headers=operator),
                       409, "conflict", "base_version")
    assert "does not exist" in body["detail"] and "leave out base_version" in body["detail"]


def test_a_policy_put_keeps_the_fields_it_leaves_out_as_every_other_put_does(client, operator):
    """Bumping max_attempts in an incident must not quietly reset the backoff to the defaults."""
    spec = {"max_attempts": 3, "base_delay_s": 1, "max_delay_s": 60, "jitter": 0.1,
            "breaker": {"failure_threshold": 9, "open_s": 10, "success_threshold": 1}}
    assert client.put("/internal/policies/p-test", json=spec, headers=operator).status_code == 201
    bumped = client.put("/internal/policies/p-test", json={"max_attempts": 6}, headers=operator)
    assert bumped.status_code == 200, bumped.get_data(as_text=True)
    kept = client.get("/internal/policies/p-test", headers=operator).json
    assert kept["version"] == 2
    fields = kept["spec"]
    assert (fields["max_attempts"], fields["base_delay_s"], fields["max_delay_s"], fields["jitter"]) == (6, 1, 60, 0.1)
    # A nested group replaces its flat fields; a bad merge is a 422 naming the field, and writes nothing.
    client.put("/internal/policies/p-test", json={"breaker": {"failure_threshold": 2, "open_s": 5,
                                                               "success_threshold": 1}}, headers=operator)
    fields = client.get("/internal/policies/p-test", headers=operator).json["spec"]
    assert (fields["breaker_failure_threshold"], fields["max_attempts"], fields["max_delay_s"]) == (2, 6, 60)
    with api_checks.nothing_written({"versions": PolicyVersion}):
        api_checks.refused(client.put("/internal/policies/p-test", json={"base_delay_s": 120}, headers=operator),
                           422, "invalid", "max_delay_s")  # as the body names it
        api_checks.refused(client.put("/internal/policies/p-test", json={"description": "x" * 256}, headers=operator),
                           422, "invalid", "description")
