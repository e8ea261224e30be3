"""POST /worker/tasks/batch: each item accepted or refused on its own, one transaction, never a 500."""

import json

import pytest
import redis
from sqlalchemy import event, func, select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import AuditEntry, OutboxMessage, Run, RunEvent, Task
from console.services.actor import Actor
from console.services.engine import batch_submit
from console.services.engine.queueing import job_id
from console.services.people import tenants
from console.services.system.alert_measures import queue_overflow
from tests import api_checks
from tests.factories import bearer, make_tenant

BATCH = "/worker/tasks/batch"
COUNTED = {"runs": Run, "run_events": RunEvent, "audit": AuditEntry, "outbox": OutboxMessage}


@pytest.fixture
def operator(auth):
    return bearer(auth.make_user("svc", "operator"))


def post(client, headers, runs, **extra):
    return client.post(BATCH, json={"runs": runs, **extra}, headers=headers)


def queued_jobs(app) -> list[str]:
    connection = redis.Redis.from_url(app.config["REDIS_URL"])
    return [name.decode() for name in connection.lrange("rq:queue:default", 0, -1)]


def run_count() -> int:
    count = db.session.execute(select(func.count()).select_from(Run)).scalar_one()
    db.session.rollback()
    return count


def test_a_mixed_batch_accepts_the_good_items_and_says_why_each_bad_one_failed(app, client, operator):
    runs = [
        {"handler": "demo.noop", "params": {"n": 1}},
        {"handler": "demo.nope"},
        {"handler": "demo.noop", "priority": 5},
        {"handler": "demo.noop", "idempotency_key": "k" * 201},
        "demo.noop",
        {"handler": "demo.noop", "policy": {"max_attempts": 0}},
        {"handler": "demo.noop", "idempotency_key": "order-1"},
    ]
    response = post(client, operator, runs)
    assert response.status_code == 202, response.get_data(as_text=True)
    answers = response.json["runs"]
    assert [answer["index"] for answer in answers] == list(range(len(runs)))
    good = [answers[0], answers[6]]
    assert all(set(answer) == {"index", "id", "status", "created"} for answer in good)
    assert all(answer["status"] == "pending" and answer["created"] is True for answer in good)
    refusals = {answer["index"]: (answer["error"], answer["field"]) for answer in answers if "error" in answer}
    assert refusals == {1: ("invalid", "handler"), 2: ("invalid", "priority"), 3: ("invalid", "idempotency_key"),
                        4: ("invalid", None), 5: ("invalid", "policy.max_attempts")}
    assert all(set(answers[i]) == {"index", "error", "detail", "field"} and answers[i]["detail"] for i in refusals)
    assert "demo.noop" in answers[1]["detail"] and "priority" in answers[2]["detail"]
    # Exactly the good ones were written, each with its timeline row, and each queued.
    stored = {run.id: run for run in db.session.execute(select(Run)).scalars()}
    assert set(stored) == {answers[0]["id"], answers[6]["id"]}
    assert stored[answers[0]["id"]].params == {"n": 1}
    assert stored[answers[6]["id"]].idempotency_key == "order-1"
    for run in stored.values():
        events = db.session.execute(select(RunEvent).where(RunEvent.run_id == run.id)).scalars().all()
        assert [(event.kind, event.to_status) for event in events] == [("submitted", "pending")]
        assert events[0].actor.startswith("svc (token rb_")
    stored = list(stored.values())
    assert sorted(queued_jobs(app)) == sorted(job_id(run.id, 1, 0) for run in stored)


def test_keys_repeated_within_a_batch_make_one_run(client, operator):
    runs = [{"handler": "demo.noop", "idempotency_key": "a"}, {"handler": "demo.noop", "idempotency_key": "b"},
            {"handler": "demo.noop", "idempotency_key": "a", "params": {"other": True}}]
    answers = post(client, operator, runs).json["runs"]
    assert answers[0]["created"] is True and answers[1]["created"] is True
    assert (answers[2]["id"], answers[2]["created"]) == (answers[0]["id"], False)
    assert run_count() == 2


def test_keys_already_in_the_database_answer_with_their_runs(app, client, operator):
    first = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "order-9"}, headers=operator)
    assert first.status_code == 202
    answers = post(client, operator, [{"handler": "demo.noop", "idempotency_key": "order-9"},
                                      {"handler": "demo.noop", "idempotency_key": "order-10"}]).json["runs"]
    assert answers[0] == {"index": 0, "id": first.json["id"], "status": "pending", "created": False}
    assert answers[1]["created"] is True
    assert run_count() == 2


@pytest.mark.parametrize("winners_handler", ["python:demo.noop", "python:demo.flaky"])
def test_a_key_another_writer_took_between_the_lookup_and_the_insert_answers_with_its_run(app, operator, monkeypatch,
                                                                                         winners_handler):
    """The insert itself dedupes (ON CONFLICT), so a writer racing past the lookup cannot make a second run; if the
    winner's run does other work, the item is that key's 409."""
    tenant = tenants.find("default")
    real = batch_submit._known
    calls = []

    def winner_commits_after_the_lookup(slots):
        calls.append(slots)
        found = real(slots)
        if len(calls) == 1:
            db.session.add(Run(tenant_id=tenant.id, handler=winners_handler, params={}, policy_overrides={},
                               idempotency_key="race-1", status="pending"))
            db.session.commit()
        return found

    monkeypatch.setattr(batch_submit, "_known", winner_commits_after_the_lookup)
    answers = batch_submit.submit_batch([{"handler": "demo.noop", "idempotency_key": "race-1"},
                                         {"handler": "demo.noop", "idempotency_key": "race-2"}],
                                        Actor("test"), lambda name, task_id: tenant)
    winner = db.session.execute(select(Run.id).where(Run.idempotency_key == "race-1")).scalar_one()
    if winners_handler == "python:demo.noop":
        assert answers[0] == {"index": 0, "id": winner, "status": "pending", "created": False}
    else:
        assert (answers[0]["error"], answers[0]["field"]) == ("conflict", "idempotency_key")
        assert f"already names run {winner}, of handler python:demo.flaky" in answers[0]["detail"]
    assert answers[1]["created"] is True
    assert len(calls) == 2  # the lost key was looked up again after the insert passed over it
    assert run_count() == 2


def test_more_than_a_thousand_runs_is_a_413_naming_the_limit(client, operator):
    with api_checks.nothing_written(COUNTED):
        response = post(client, operator, [{"handler": "demo.noop"}] * 1001)
    body = api_checks.refused(response, 413, "too_many_runs", "runs")
    assert "1,000" in body["detail"] and "1,001" in body["detail"]


def test_a_thousand_runs_are_accepted(client, operator):
    response = post(client, operator, [{"handler": "demo.noop", "params": {"i": i}} for i in range(1000)])
    assert response.status_code == 202
    assert all(answer["created"] for answer in response.json["runs"])
    assert run_count() == 1000


@pytest.mark.parametrize(("item", "field", "says"), [
    pytest.param({"task_id": 10**30}, "task_id", "no task", id="huge-task-id"),
    pytest.param({"handler": "demo.noop", "idempotency_key": 10**30}, "idempotency_key", "string", id="huge-key"),
    pytest.param({"handler": "demo.noop", "tenant": 10**30}, "tenant", "tenant name", id="huge-tenant"),
    pytest.param({"handler": "demo.noop", "policy": {"max_attempts": 10**30}}, "policy.max_attempts", "1 to 100",
                 id="huge-override"),
    pytest.param({"handler": "demo.noop", "params": {"a": json.loads("[" * 100 + "]" * 100)}}, "params", "nested",
                 id="deep-json"),
    pytest.param({"handler": "demo.noop", "params": {"a": "\ud800"}}, "params", "text at runs[1].params.a is not valid",
                 id="lone-surrogate"),
    pytest.param({"handler": "demo.noop", "idempotency_key": "\udfff"}, "idempotency_key", "Unicode",
                 id="surrogate-key"),
    pytest.param({"handler": "demo.noop", "params": {"a": float("nan")}}, "params",
                 "the number at runs[1].params.a is not finite", id="nan"),
    pytest.param({"handler": {"a": 1}}, "handler", "string", id="handler-an-object"),
    pytest.param({"handler": "demo.noop", "policy": [1]}, "policy", "policy", id="policy-a-list"),
    pytest.param({"handler": "demo.noop", "params": {"a": "x" * 70_000}}, "params", "bytes", id="params-too-large"),
])
def test_a_hostile_item_is_refused_on_its_own_and_its_neighbours_go_through(client, operator, item, field, says):
    body = json.dumps({"runs": [{"handler": "demo.noop"}, item]}, allow_nan=True)
    response = client.post(BATCH, data=body, content_type="application/json", headers=operator)
    assert response.status_code == 202, response.get_data(as_text=True)
    good, bad = response.json["runs"]
    assert good["created"] is True
    assert (bad["error"], bad["field"]) == ("invalid", field), bad
    assert says in bad["detail"]
    assert run_count() == 1


@pytest.mark.parametrize(("data", "status", "error"), [
    pytest.param('{"runs": ' + "[" * 5000 + "]" * 5000 + "}", 400, "bad_json", id="too-deep-to-read"),
    pytest.param('{"runs": [{"handler": "demo.noop", "params": {"n": ' + "9" * 5000 + "}}]}", 400, "bad_json",
                 id="an-integer-of-5000-digits"),
    pytest.param(b'{"runs": [{"handler": "demo.\xff"}]}', 400, "bad_json", id="bytes-not-utf8"),
    pytest.param("{not json", 400, "bad_json", id="broken"),
    # A key given twice, as every other body refuses it: the batch stored the last one (helper 152).
    pytest.param('{"runs": [{"handler": "demo.noop", "params": {"amount": 1, "amount": 1000000}}]}', 400, "bad_json",
                 id="a-key-twice-in-an-item"),
    pytest.param('{"runs": [], "runs": [{"handler": "demo.noop"}]}', 400, "bad_json", id="runs-twice"),
    pytest.param('[{"handler": "demo.noop"}]', 400, "bad_request", id="a-list"),
    pytest.param('{"runs": {"handler": "demo.noop"}}', 422, "invalid", id="runs-an-object"),
    pytest.param('{"runs": []}', 422, "invalid", id="no-runs"),
    pytest.param('{"runs": [], "mode": "fast"}', 422, "invalid", id="unknown-field"),
])
def test_a_body_that_cannot_be_read_as_a_batch_is_refused_whole(client, operator, data, status, error):
    with api_checks.nothing_written(COUNTED):
        response = client.post(BATCH, data=data, content_type="application/json", headers=operator)
    refused = api_checks.refused(response, status, error, response.json.get("field"))
    # Said as POST /worker/tasks says it, not in Python's words ("Exceeds the limit (4300 digits)…", "codec").
    assert not any(word in refused["detail"] for word in ("sys.set_int_max_str_digits", "codec", "position"))


def test_the_queue_limit_refuses_the_items_past_it_with_one_alert(client, operator):
    policy = {"queue_limit": 2}
    answers = post(client, operator, [{"handler": "demo.noop", "policy": policy} for _ in range(4)]).json["runs"]
    assert [answer.get("created") for answer in answers] == [True, True, None, None]
    assert {(answer["error"], answer["field"]) for answer in answers[2:]} == {("queue_full", "queue_limit")}
    assert "queue_limit 2" in answers[2]["detail"]
    assert run_count() == 2
    alert = db.session.execute(select(OutboxMessage).where(OutboxMessage.kind == "alert")).scalar_one()
    assert (alert.payload["limit"], alert.payload["current"], alert.payload["max"]) == ("queue_limit", 2, 2)
    # One alert, counting every item it refused: the Queue overflow rule reads "2 submissions were refused", not 1.
    assert alert.occurrences == 2
    post(client, operator, [{"handler": "demo.noop", "policy": policy} for _ in range(3)])
    db.session.refresh(alert)
    assert alert.occurrences == 5
    assert queue_overflow(utcnow(), 300).detail == "5 submissions were refused because a queue was full"


def test_tasks_and_tenants_are_checked_per_item(client, auth):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    task = Task(tenant_id=globex.id, name="nightly", handler="python:demo.noop", params={"from": "task"})
    own = Task(tenant_id=acme.id, name="hourly", handler="python:demo.noop", params={"from": "task", "n": 0})
    db.session.add_all([task, own])
    db.session.commit()
    headers = bearer(auth.make_user("acme-svc", "operator"), tenant=acme)
    answers = post(client, headers, [{"handler": "demo.noop", "tenant": "globex"}, {"task_id": task.id},
                                     {"task_id": own.id, "params": {"n": 1}}, {"handler": "demo.noop"}]).json["runs"]
    assert (answers[0]["error"], answers[0]["field"]) == ("forbidden", "tenant")
    assert (answers[1]["error"], answers[1]["field"]) == ("invalid", "task_id")
    assert answers[2]["created"] and answers[3]["created"]
    stored = db.session.get(Run, answers[2]["id"])
    assert (stored.tenant_id, stored.task_id, stored.params) == (acme.id, own.id, {"from": "task", "n": 1})
    assert db.session.get(Run, answers[3]["id"]).tenant_id == acme.id


def test_a_viewer_token_may_not_submit_a_batch(client, auth):
    headers = bearer(auth.make_user("vic", "viewer"))
    with api_checks.nothing_written(COUNTED):
        api_checks.refused(post(client, headers, [{"handler": "demo.noop"}]), 403, "forbidden")


def test_a_batch_is_one_insert_and_one_redis_round_trip(app, operator, monkeypatch):
    tenant = tenants.find("default")
    connection = redis.Redis.from_url(app.config["REDIS_URL"])
    connection.script_flush()  # the first call after a restart of Redis loads the script again, once
    trips = []
    real = redis.Redis.execute_command
    monkeypatch.setattr(redis.Redis, "execute_command", lambda self, *args, **kw: trips.append(args[0]) or
                        real(self, *args, **kw))
    real_pipeline = redis.client.Pipeline.execute
    monkeypatch.setattr(redis.client.Pipeline, "execute", lambda self, *a, **kw: trips.append("pipeline") or
                        real_pipeline(self, *a, **kw))
    statements = []

    def listener(conn, cursor, statement, *args):
        statements.append(" ".join(statement.split()[:3]))

    event.listen(db.engine, "before_cursor_execute", listener)
    try:
        # Two timeouts: the policy's default and an override, so two groups of jobs.
        answers = batch_submit.submit_batch([{"handler": "demo.noop", "params": {"i": i}} for i in range(300)]
                                            + [{"handler": "demo.noop", "policy": {"timeout_s": 5}}] * 3,
                                            Actor("test"), lambda name, task_id: tenant)
        first_trips = list(trips)
        trips.clear()
        batch_submit.submit_batch([{"handler": "demo.noop"}, {"handler": "demo.noop", "policy": {"timeout_s": 5}}],
                                  Actor("test"), lambda name, task_id: tenant)
    finally:
        event.remove(db.engine, "before_cursor_execute", listener)
    assert sum(answer["created"] for answer in answers) == 303  # the three alike have no key, so three runs
    assert statements.count("INSERT INTO runs") == 2 and statements.count("INSERT INTO run_events") == 2
    assert first_trips == ["pipeline", "SCRIPT LOAD", "pipeline"]  # the script was missing, so once more
    assert trips == ["pipeline"]
    assert len(queued_jobs(app)) == 305


def test_a_task_id_names_its_tenant_in_a_batch_as_in_a_single_submit(client, auth, operator):
    """An unscoped token's {"task_id": N} runs in the task's tenant; a scoped token still sees only its own."""
    acme = make_tenant("acme")
    task = Task(tenant_id=acme.id, name="acme-sync", handler="python:demo.noop")
    db.session.add(task)
    db.session.commit()
    answers = post(client, operator, [{"task_id": task.id}, {"task_id": task.id, "tenant": "default"}]).json["runs"]
    assert answers[0]["created"] and db.session.get(Run, answers[0]["id"]).tenant_id == acme.id
    assert (answers[1]["error"], answers[1]["detail"]) == ("invalid", f"no task {task.id} in tenant default")
    scoped = bearer(auth.make_user("gil", "operator", tenant=make_tenant("globex")))
    hidden = post(client, scoped, [{"task_id": task.id}]).json["runs"][0]
    assert (hidden["error"], hidden["detail"]) == ("invalid", f"no task {task.id} in tenant globex")


def test_a_known_key_sent_for_other_work_is_that_items_409(client, operator):
    """A key already naming a run of another handler, or used in this batch for other work, is refused on its own."""
    first = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "order-42"}, headers=operator)
    run_id = first.json["id"]
    answers = post(client, operator, [
        {"handler": "demo.flaky", "idempotency_key": "order-42"},
        {"handler": "demo.noop", "idempotency_key": "order-42", "params": {"retry": 2}},
        {"handler": "demo.noop", "idempotency_key": "order-43"},
        {"handler": "demo.flaky", "idempotency_key": "order-43"}]).json["runs"]
    assert answers[0] == {"index": 0, "error": "conflict", "field": "idempotency_key", "detail": (
        f"idempotency_key 'order-42' already names run {run_id}, of handler python:demo.noop: send other work "
        "with a new key")}
    assert (answers[1]["id"], answers[1]["created"]) == (run_id, False)  # params may differ
    assert answers[2]["created"] is True
    assert (answers[3]["error"], answers[3]["field"]) == ("conflict", "idempotency_key")
    assert f"already names run {answers[2]['id']}, of handler python:demo.noop" in answers[3]["detail"]
    assert run_count() == 2
