"""A person or token limited to a tenant sets circuit-breaker settings only for its tenant's own breaker.

One tenant's token sent `{"breaker": {"failure_threshold": 1, "open_s": 86400}}` with a run: its one failure opened
the handler's breaker, which every tenant's runs of that handler count on, for a day (helper 152).
"""

import pytest
from sqlalchemy import func, select

from console.extensions import db
from console.models import Run, Task, Workflow
from console.services.engine.execute import execute
from console.services.runs.waiting import why_waiting
from tests import api_checks
from tests.factories import bearer, make_tenant

SHARED = {"breaker": {"failure_threshold": 1, "open_s": 86400}}
OWN = {"breaker": {"failure_threshold": 1, "open_s": 86400, "scope": "handler_and_tenant"}}


def count(model) -> int:
    found = db.session.execute(select(func.count()).select_from(model)).scalar_one()
    db.session.rollback()
    return found


def submit(policy) -> tuple[str, dict]:
    return "/worker/tasks", {"handler": "demo.noop", "idempotency_key": "brk-1", "policy": policy}


def batch(policy) -> tuple[str, dict]:
    return "/worker/tasks/batch", {"runs": [{"handler": "demo.noop", "idempotency_key": "brk-1", "policy": policy}]}


def workflow(policy) -> tuple[str, dict]:
    return "/api/workflows", {"name": "ship", "idempotency_key": "wf-1",
                              "steps": [{"handler": "demo.noop"}, {"handler": "demo.noop", "policy": policy}]}


def task(policy) -> tuple[str, dict]:
    return "/internal/tasks/register", {"name": "sync", "handler": "demo.noop", "cron": "0 * * * *",
                                        "policy": policy}


def failure_report(policy) -> tuple[str, dict]:
    return "/events", {"type": "task.execution.failed", "idempotency_key": "ext-1", "error_code": "boom",
                       "handler": "demo.noop", "policy": policy}


# The endpoint, the field its refusal names, and the rows that must stay unwritten.
WAYS = [(submit, "policy.breaker", Run), (workflow, "steps[1].policy.breaker", Workflow),
        (task, "policy.breaker", Task), (failure_report, "policy.breaker", Run)]


@pytest.fixture
def acme_token(auth):
    acme = make_tenant("acme")
    return bearer(auth.make_user("olga", "operator", tenant=acme))


@pytest.mark.parametrize(("way", "field", "model"), WAYS, ids=lambda value: getattr(value, "__name__", value))
def test_a_tenant_limited_token_may_not_set_a_shared_breakers_settings(client, acme_token, way, field, model):
    path, body = way(SHARED)
    refused = api_checks.refused(client.post(path, json=body, headers=acme_token), 403, "forbidden", field)
    assert "breaker.scope handler_and_tenant" in refused["detail"]
    assert count(model) == 0
    path, body = way(OWN)  # its tenant's own breaker: its failures hold only its tenant's runs
    assert client.post(path, json=body, headers=acme_token).status_code in (201, 202)


def test_a_batch_refuses_that_run_alone(client, acme_token):
    answer = client.post("/worker/tasks/batch", headers=acme_token, json={"runs": [
        {"handler": "demo.noop", "idempotency_key": "a", "policy": SHARED},
        {"handler": "demo.noop", "idempotency_key": "b", "policy": OWN}]}).json
    assert [item.get("error") for item in answer["runs"]] == ["forbidden", None], answer
    assert answer["runs"][0]["field"] == "policy.breaker"


def test_a_retry_with_a_new_policy_is_refused_the_same_way(client, acme_token, runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 9, "error": "fatal"}, tenant="acme")
    assert execute(run_id, 0, clock=clock) == "dead"
    api_checks.refused(client.post("/internal/tasks/retry", headers=acme_token,
                                   json={"run_id": run_id, "policy": SHARED}), 403, "forbidden", "policy.breaker")
    assert runs.get(run_id).status == "dead"


def test_a_token_of_every_tenant_still_may(client, auth):
    everyone = bearer(auth.make_user("root", "operator"))
    for way in (submit, workflow, task):
        path, body = way(SHARED)
        assert client.post(path, json=body, headers=everyone).status_code in (201, 202), path


def test_a_breaker_opened_by_a_runs_override_says_so_not_that_its_policy_did(runs, clock):
    """"It was opened by policy default v1 (1 failure in a row, open 86400 s)": a run's override, read as the
    default policy's settings (helper 152)."""
    opener = runs.submit("demo.flaky", {"fail_times": 9}, policy={**SHARED, "max_attempts": 1})
    assert execute(opener, 0, clock=clock) == "dead"
    held = runs.submit("demo.flaky", {"fail_times": 0})
    assert execute(held, 0, clock=clock) == "breaker_open"
    said = why_waiting(runs.get(held), clock())
    assert ("It was opened by policy default v1 with overrides (1 failure in a row, open 86400 s); this run's policy "
            "default v1 opens it after 5 failures in a row, for 30 s.") in said, said
