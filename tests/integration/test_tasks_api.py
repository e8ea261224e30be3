"""The task API end to end: register, inspect, edit, pause, resume, trigger, delete, and tasks fired by events.

No worker runs, so every run a task creates stays pending; Redis is real (debounce and queueing use it).
"""

from datetime import UTC, datetime, time, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm.attributes import set_committed_value

from console.extensions import db
from console.models import AuditEntry, EventReceipt, OutboxMessage, Run, RunEvent, Task
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.errors import NotFound
from console.services.scheduling import event_receipts, tasks
from tests import api_checks
from tests.factories import bearer, make_tenant

COUNTED = {"tasks": Task, "audit": AuditEntry, "runs": Run, "run_events": RunEvent, "outbox": OutboxMessage}
BERLIN_OFFSETS = {timedelta(hours=1), timedelta(hours=2)}
DROP = object()  # a key to leave out of the request body


def counts() -> dict[str, int]:
    return api_checks.counts(COUNTED)


def nothing_written():
    return api_checks.nothing_written(COUNTED)


refused = api_checks.refused




def task_body(**changes) -> dict:
    """A good registration body, with some fields changed (DROP leaves one out)."""
    body = {"name": "weekly-report", "handler": "demo.noop", "cron": "30 2 * * MON", "timezone": "Europe/Berlin"}
    body.update(changes)
    return {key: value for key, value in body.items() if value is not DROP}


def audit_rows(action: str, task_id: int) -> list[AuditEntry]:
    rows = db.session.execute(select(AuditEntry).where(AuditEntry.action == action,
                                                       AuditEntry.target_id == str(task_id))
                              .order_by(AuditEntry.seq)).scalars().all()
    db.session.rollback()
    return rows


def run_of(run_id: int) -> Run:
    db.session.expire_all()
    return db.session.get(Run, run_id)


def runs_of(task_id: int) -> list[Run]:
    db.session.expire_all()
    return db.session.execute(select(Run).where(Run.task_id == task_id).order_by(Run.id)).scalars().all()


def assert_weekly_berlin(next_runs: list[str]) -> None:
    """Five increasing firings, each a Monday at 02:30 Berlin time, shown with Berlin's offset."""
    assert len(next_runs) == 5, next_runs
    moments = [datetime.fromisoformat(text) for text in next_runs]
    for moment in moments:
        assert moment.utcoffset() in BERLIN_OFFSETS, moment
        assert moment.weekday() == 0 and moment.time() == time(2, 30), moment
    assert moments == sorted(moments) and len(set(moments)) == 5
    assert all(later - earlier in (timedelta(days=7), timedelta(days=7, hours=1), timedelta(days=7, hours=-1))
               for earlier, later in zip(moments, moments[1:], strict=False))


@pytest.fixture
def operator(auth):
    """Headers of an operator token that may act for every tenant."""
    return bearer(auth.make_user("svc", "operator"))


@pytest.fixture
def register(client, operator):
    """Register a task through the API and return its JSON."""

    def create(headers=None, **changes) -> dict:
        response = client.post("/internal/tasks/register", json=task_body(**changes), headers=headers or operator)
        assert response.status_code == 201, response.get_data(as_text=True)
        return as_read(response.json)

    return create


def as_read(saved: dict) -> dict:
    """A save's answer as GET answers the task: without what the save added to the conflict forecast."""
    return {key: value for key, value in saved.items() if key != "conflicts_created"}


# --- the life of a task -----------------------------------------------------------------------------------------


def test_register_returns_the_task_with_its_description_and_next_runs(client, operator):
    response = client.post("/internal/tasks/register", json=task_body(), headers=operator)
    assert response.status_code == 201, response.get_data(as_text=True)
    body = response.json
    assert isinstance(body["id"], int)
    assert (body["name"], body["tenant"], body["handler"]) == ("weekly-report", "default", "python:demo.noop")
    assert (body["cron"], body["timezone"], body["paused"]) == ("30 2 * * MON", "Europe/Berlin", False)
    assert "02:30" in body["cron_description"] and "Monday" in body["cron_description"], body["cron_description"]
    assert_weekly_berlin(body["next_runs"])
    assert datetime.fromisoformat(body["next_runs"][0]) > datetime.now().astimezone()
    [entry] = audit_rows("task.register", body["id"])
    assert entry.after["name"] == "weekly-report" and entry.tenant == "default"


def test_get_returns_what_register_returned(client, operator, register):
    created = register()
    response = client.get(f"/internal/tasks/{created['id']}", headers=operator)
    assert response.status_code == 200
    assert response.json == created


def test_a_save_answers_the_conflicts_it_added_to_the_forecast_as_the_form_warns(client, operator):
    # The console's form warned of 288 mutex overlaps; the API, the seed's own caller of register, said nothing.
    ledger = {"cron": "*/5 * * * *", "timezone": "UTC", "mutex_key": "ledger", "concurrency_policy": "forbid"}
    first = client.post("/internal/tasks/register", json=task_body(name="ledger-a", **ledger), headers=operator)
    assert first.status_code == 201 and first.json["conflicts_created"] is None
    second = client.post("/internal/tasks/register", json=task_body(name="ledger-b", **ledger), headers=operator)
    made = second.json["conflicts_created"]
    assert second.status_code == 201 and made["counts"]["mutex"] > 0, second.json
    assert made["summary"].startswith(f"{made['counts']['mutex']} mutex overlaps (first at ")
    assert made["forecast"] == "/tasks/forecast?tenant=default" and set(made["first_at"]) == {"mutex"}
    moved = client.put(f"/internal/tasks/{second.json['id']}", json={"mutex_key": "ledger-b"}, headers=operator)
    assert moved.status_code == 200 and moved.json["conflicts_created"] is None  # a save that removes them adds none


def test_edit_changes_next_runs_and_is_audited_with_before_and_after(client, operator, register):
    created = register()
    response = client.put(f"/internal/tasks/{created['id']}", json={"cron": "0 * * * *"}, headers=operator)
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.json
    assert body["cron"] == "0 * * * *" and body["name"] == "weekly-report" and body["timezone"] == "Europe/Berlin"
    assert body["next_runs"] != created["next_runs"]
    moments = [datetime.fromisoformat(text) for text in body["next_runs"]]
    assert len(moments) == 5 and all(m.minute == 0 and m.utcoffset() in BERLIN_OFFSETS for m in moments)
    assert all(later - earlier == timedelta(hours=1) for earlier, later in zip(moments, moments[1:], strict=False))
    [entry] = audit_rows("task.edit", created["id"])
    assert entry.before["cron"] == "30 2 * * MON" and entry.after["cron"] == "0 * * * *"
    assert entry.before["name"] == entry.after["name"] == "weekly-report"
    assert client.get(f"/internal/tasks/{created['id']}", headers=operator).json["cron"] == "0 * * * *"


def test_edit_that_changes_nothing_writes_no_audit_row(client, operator, register):
    created = register()
    with nothing_written():
        response = client.put(f"/internal/tasks/{created['id']}", json={"cron": "30 2 * * MON"}, headers=operator)
    assert response.status_code == 200
    assert response.json["next_runs"] == created["next_runs"]


def test_edit_with_the_updated_at_read_saves_and_one_over_a_later_change_is_409(client, operator, register):
    created = register()
    first = client.put(f"/internal/tasks/{created['id']}", headers=operator,
                       json={"cron": "0 * * * *", "base_updated_at": created["updated_at"]})
    assert first.status_code == 200, first.get_data(as_text=True)
    assert first.json["updated_at"] != created["updated_at"]
    with nothing_written():
        stale = client.put(f"/internal/tasks/{created['id']}", headers=operator,
                           json={"cron": "15 * * * *", "base_updated_at": created["updated_at"]})
    refused(stale, 409, "conflict", "base_updated_at")
    assert "changed since the updated_at you sent" in stale.json["detail"]
    assert "nothing was saved" in stale.json["detail"]
    assert client.get(f"/internal/tasks/{created['id']}", headers=operator).json == as_read(first.json)


@pytest.mark.parametrize("value", ["yesterday", 5, True, "2026-12-01T10:00:00", "9999-12-31T23:59:59-01:00",
                                   "2026-12-01T10:00:00+00:00" + "0" * 100])
def test_edit_with_a_base_updated_at_that_is_no_time_is_422(client, operator, register, value):
    created = register()
    with nothing_written():
        response = client.put(f"/internal/tasks/{created['id']}", headers=operator,
                              json={"cron": "0 * * * *", "base_updated_at": value})
    refused(response, 422, "invalid", "base_updated_at")
    assert "as a GET returns it" in response.json["detail"]


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"cron": DROP, "event": "order.created", "jitter_s": 30}, "jitter_s",
     "a jitter spreads cron firings only, and this task has no cron: give it a cron expression, or set the jitter to "
     "0"),
    ({"debounce_s": 10}, "debounce_s", "a debounce collapses repeated events only"),
    ({"sla": {"max_start_delay_s": 600, "deadline_s": 60}}, "sla.deadline_s", "must be at least max_start_delay_s"),
    # Valid, but longer than the column holds: PostgreSQL refused it as a database error (a 500).
    ({"cron": ",".join(str(minute) for minute in range(60)) + " * * * *"}, "cron",
     "cron is at most 120 characters, got 177"),
    # It acts on runs holding the same mutex key: without one it was a 201 that did nothing (helper 151).
    ({"concurrency_policy": "replace"}, "concurrency_policy", "concurrency_policy replace needs a mutex_key"),
    ({"concurrency_policy": "forbid", "mutex_key": None}, "concurrency_policy",
     "concurrency_policy forbid needs a mutex_key"),
    # "ledger" and "ledger\u200b" look alike and are two keys: runs meant to exclude each other would not (helper 155).
    ({"concurrency_policy": "forbid", "mutex_key": "ledger\u200b"}, "mutex_key",
     "mutex_key must not contain invisible characters or spaces other than a plain one; it holds U+200B"),
    ({"mutex_key": "ledger\u202e"}, "mutex_key", "it holds U+202E (right-to-left override) at position 7"),
])
def test_a_setting_that_could_never_act_is_refused_at_registration(client, operator, changes, field, words):
    with nothing_written():
        response = client.post("/internal/tasks/register", json=task_body(**changes), headers=operator)
    refused(response, 422, "invalid", field)
    assert words in response.json["detail"]


def test_a_deadline_shorter_than_the_policys_start_limit_is_refused(client, operator, register):
    saved = client.put("/internal/policies/slow-start", json={"sla": {"max_start_delay_s": 600}}, headers=operator)
    assert saved.status_code in (200, 201), saved.get_data(as_text=True)
    with nothing_written():
        response = client.post("/internal/tasks/register", headers=operator,
                               json=task_body(policy="slow-start", sla={"deadline_s": 300}))
    said = refused(response, 422, "invalid", "sla")["detail"]
    assert ("the deadline in force (300 s, this task's) is shorter than the start limit in force (600 s, its "
            "policy's)") in said
    created = register(policy="slow-start", sla={"deadline_s": 900})
    with nothing_written():
        refused(client.put(f"/internal/tasks/{created['id']}", json={"sla": {"deadline_s": 60}}, headers=operator),
                422, "invalid", "sla")


def test_a_policy_edit_that_would_put_a_tasks_deadline_before_its_start_limit_is_refused(client, operator, register):
    """The task's save refuses the combination; an edit of its policy made it, unseen (helper 95)."""
    assert client.put("/internal/policies/slow-start", json={"sla": {"max_start_delay_s": 100}},
                      headers=operator).status_code == 201
    created = register(policy="slow-start", sla={"deadline_s": 150})
    with nothing_written():
        said = refused(client.put("/internal/policies/slow-start", json={"sla": {"max_start_delay_s": 300}},
                                  headers=operator), 422, "invalid", "sla")["detail"]
    assert said == (f"sla: this would give task {created['name']} (deadline 150 s, start limit 300 s) a deadline "
                    "shorter than its start limit; change its SLA first, or this one")
    # Other edits of the policy, and SLA edits that keep the order, go through.
    assert client.put("/internal/policies/slow-start", json={"max_attempts": 3}, headers=operator).status_code == 200
    assert client.put("/internal/policies/slow-start", json={"sla": {"max_start_delay_s": 120}},
                      headers=operator).status_code == 200


def test_dropping_the_trigger_a_setting_shapes_is_refused_and_other_edits_leave_it_alone(client, operator, register):
    created = register(event="order.created", debounce_s=10)
    with nothing_written():
        refused(client.put(f"/internal/tasks/{created['id']}", json={"event": None}, headers=operator),
                422, "invalid", "debounce_s")
    # A task stored before the rule (a debounce, no event) still takes edits that touch neither.
    db.session.execute(update(Task).where(Task.id == created["id"]).values(event=None))
    db.session.commit()
    renamed = client.put(f"/internal/tasks/{created['id']}", json={"name": "renamed"}, headers=operator)
    assert renamed.status_code == 200, renamed.get_data(as_text=True)


def test_an_event_whose_data_and_a_tasks_params_together_pass_the_limit_fires_nothing(client, operator, register):
    """Each under 64 KiB, together 80 KB: the run was created with them (helper 104)."""
    register(name="big", cron=DROP, event="order.created", params={"a": "x" * 40_000})
    with nothing_written():
        body = refused(client.post("/events", json={"type": "order.created", "data": {"b": "y" * 40_000}},
                                   headers=operator), 422, "invalid", "data")
    assert body["detail"].startswith("data merged into task big's params: params are 80,")


def test_a_tasks_failure_reported_without_a_tenant_acts_for_the_tasks_tenant_as_its_submit_does(client, operator,
                                                                                                  register):
    """A token of every tenant submitting a task's run acts for the task's tenant; its failure report read "no task
    in tenant default" (helper 104)."""
    make_tenant("acme")
    task = register(tenant="acme", name="acme-sync")
    answer = client.post("/events", json={"type": "task.execution.failed", "idempotency_key": "acme-1",
                                          "error_code": "http_502", "task_id": task["id"]}, headers=operator)
    assert answer.status_code == 202, answer.json
    assert client.get(f"/worker/tasks/{answer.json['id']}", headers=operator).json["tenant"] == "acme"


def test_bad_edit_is_422_and_leaves_the_task_as_it_was(client, operator, register):
    created = register()
    with nothing_written():
        refused(client.put(f"/internal/tasks/{created['id']}", json={"cron": "61 * * * *"}, headers=operator),
                422, "invalid", "cron")
        refused(client.put(f"/internal/tasks/{created['id']}", json={"params": {"blob": "x" * 200_000}},
                           headers=operator), 422, "invalid", "params")
    assert client.get(f"/internal/tasks/{created['id']}", headers=operator).json == created


def test_pause_and_resume_flip_paused_and_are_audited(client, operator, register):
    task_id = register()["id"]
    paused = client.put(f"/internal/tasks/{task_id}/pause", headers=operator)
    assert paused.status_code == 200 and paused.json["paused"] is True
    [entry] = audit_rows("task.pause", task_id)
    assert (entry.before, entry.after) == ({"paused": False}, {"paused": True})
    assert client.get(f"/internal/tasks/{task_id}", headers=operator).json["paused"] is True

    resumed = client.put(f"/internal/tasks/{task_id}/resume", headers=operator)
    assert resumed.status_code == 200 and resumed.json["paused"] is False
    [entry] = audit_rows("task.resume", task_id)
    assert (entry.before, entry.after) == ({"paused": True}, {"paused": False})
    assert client.get(f"/internal/tasks/{task_id}", headers=operator).json["paused"] is False


def test_pausing_a_paused_task_writes_nothing(client, operator, register):
    task_id = register()["id"]
    assert client.put(f"/internal/tasks/{task_id}/pause", headers=operator).status_code == 200
    with nothing_written():
        again = client.put(f"/internal/tasks/{task_id}/pause", headers=operator)
    assert again.status_code == 200 and again.json["paused"] is True


def test_trigger_creates_a_pending_manual_run_listed_under_the_task(client, operator, register):
    task_id = register(params={"region": "eu"})["id"]
    response = client.post(f"/internal/tasks/{task_id}/trigger", headers=operator)
    assert response.status_code == 202, response.get_data(as_text=True)
    body = response.json
    assert body["task_id"] == task_id and body["status"] == "created" and isinstance(body["run_id"], int)
    run = run_of(body["run_id"])
    assert (run.source, run.status, run.task_id, run.handler) == ("manual", "pending", task_id, "python:demo.noop")
    assert run.params == {"region": "eu"}
    [entry] = audit_rows("task.trigger", task_id)
    assert entry.after == {"run_id": body["run_id"]}

    listed = client.get(f"/internal/tasks/{task_id}/runs", headers=operator)
    assert listed.status_code == 200
    [row] = listed.json
    assert (row["id"], row["status"]) == (body["run_id"], "pending")
    for key in ("scheduled_for", "enqueued_at"):
        assert datetime.fromisoformat(row[key]).utcoffset() is not None, row


def test_a_paused_task_can_still_be_triggered_by_hand(client, operator, register):
    task_id = register()["id"]
    client.put(f"/internal/tasks/{task_id}/pause", headers=operator)
    response = client.post(f"/internal/tasks/{task_id}/trigger", headers=operator)
    assert response.status_code == 202 and response.json["status"] == "created"
    assert run_of(response.json["run_id"]).status == "pending"


def test_trigger_outside_the_window_waits_unless_asked_to_run_outside_it(client, operator, register):
    opens = (datetime.now(UTC).hour + 2) % 24
    task_id = register(window={"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], "start": f"{opens:02d}:00",
                               "end": f"{(opens + 1) % 24:02d}:00", "timezone": "UTC"})["id"]
    waits = client.post(f"/internal/tasks/{task_id}/trigger", headers=operator).json
    assert (waits["status"], waits["reason"]) == ("created", "window")
    # A client that sends a JSON Content-Type with no body (as many do) is answered as one that sends nothing.
    empty = client.post(f"/internal/tasks/{task_id}/trigger", headers={**operator, "Content-Type": "application/json"})
    assert empty.status_code == 202 and empty.json["reason"] == "window"
    now = client.post(f"/internal/tasks/{task_id}/trigger", json={"outside_window": True}, headers=operator).json
    assert (now["status"], now["reason"], now["run_id"]) == ("released", None, waits["run_id"])  # the oldest waiting
    again = client.post(f"/internal/tasks/{task_id}/trigger", json={"outside_window": True}, headers=operator).json
    assert (again["status"], again["run_id"]) == ("released", empty.json["run_id"])
    fresh = client.post(f"/internal/tasks/{task_id}/trigger", json={"outside_window": True}, headers=operator).json
    assert (fresh["status"], fresh["reason"]) == ("created", None)
    with nothing_written():
        refused(client.post(f"/internal/tasks/{task_id}/trigger", json={"outside_window": "yes"}, headers=operator),
                422, "invalid", "outside_window")
        refused(client.post(f"/internal/tasks/{task_id}/trigger", json={"window": False}, headers=operator),
                422, "invalid", "window")


def test_run_now_outside_the_window_starts_a_forbid_tasks_waiting_run_instead_of_a_cancelled_second(
        client, operator, register):
    """The waiting run held the task's mutex: a new run was cancelled at once (mutex forbid), never starting."""
    opens = (datetime.now(UTC).hour + 2) % 24
    task_id = register(window={"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], "start": f"{opens:02d}:00",
                               "end": f"{(opens + 1) % 24:02d}:00", "timezone": "UTC"},
                       mutex_key="ledger", concurrency_policy="forbid")["id"]
    waits = client.post(f"/internal/tasks/{task_id}/trigger", headers=operator).json
    now = client.post(f"/internal/tasks/{task_id}/trigger", json={"outside_window": True}, headers=operator).json
    assert (now["status"], now["run_id"]) == ("released", waits["run_id"])
    released = run_of(now["run_id"])
    assert (released.status, released.status_reason) == ("pending", None)


def test_delete_hides_the_task_and_frees_its_name(client, operator, register):
    task_id = register()["id"]
    # A body it does not read is refused, as every write refuses one (it was dropped unseen; helper 135).
    for method, path in (("delete", ""), ("put", "/pause"), ("put", "/resume")):
        with nothing_written():
            refused(getattr(client, method)(f"/internal/tasks/{task_id}{path}", json={"confirm": True},
                                            headers=operator), 422, "invalid", "confirm")
    response = client.delete(f"/internal/tasks/{task_id}", headers=operator)
    assert response.status_code == 200
    assert response.json == {"id": task_id, "deleted": True, "waiting_runs": 0}
    assert len(audit_rows("task.delete", task_id)) == 1
    refused(client.get(f"/internal/tasks/{task_id}", headers=operator), 404, "not_found")
    # Said as it is: a person saving an edit of a task someone deleted meanwhile read a bare "no task" (helper 122).
    assert client.put(f"/internal/tasks/{task_id}", headers=operator, json={"cron": "0 * * * *"}).json["detail"] == (
        f"no task with id {task_id}: it was deleted")
    refused(client.get(f"/internal/tasks/{task_id}/runs", headers=operator), 404, "not_found")
    with nothing_written():
        refused(client.post(f"/internal/tasks/{task_id}/trigger", headers=operator), 404, "not_found")
        refused(client.delete(f"/internal/tasks/{task_id}", headers=operator), 404, "not_found")

    again = register()
    assert again["id"] != task_id and again["name"] == "weekly-report"


def test_two_deletes_of_one_task_at_once_free_its_name_once(register):
    # Each request read the task live before either wrote (a double click, a retried call): the second must not
    # free the name again nor audit a second delete.
    task = db.session.get(Task, register()["id"])
    tasks.delete(task, Actor("first"))
    db.session.expire_all()
    stale = db.session.get(Task, task.id)
    set_committed_value(stale, "deleted_at", None)  # what the second request had read
    with pytest.raises(NotFound, match="deleted meanwhile"):
        tasks.delete(stale, Actor("second"))
    db.session.expire_all()
    assert db.session.get(Task, task.id).name == f"weekly-report~deleted-{task.id}"
    assert len(audit_rows("task.delete", task.id)) == 1


def test_a_delete_audits_the_task_as_it_deleted_it_not_as_it_read_it(register):
    """A pause committed between the delete's read and its write: the delete's audit row said paused false (helper
    122)."""
    task = db.session.get(Task, register()["id"])
    tasks.set_paused(task, True, Actor("other"))
    set_committed_value(task, "paused", False)  # what the delete's request had read
    tasks.delete(task, Actor("first"))
    [row] = audit_rows("task.delete", task.id)
    assert row.before["paused"] is True and row.before["name"] == "weekly-report"


def test_unknown_task_is_404(client, operator):
    with nothing_written():
        for method, path in (("get", ""), ("put", ""), ("delete", ""), ("put", "/pause"), ("put", "/resume"),
                             ("post", "/trigger"), ("get", "/runs")):
            kwargs = {"json": {"cron": "0 * * * *"}} if (method, path) == ("put", "") else {}
            refused(getattr(client, method)(f"/internal/tasks/999{path}", headers=operator, **kwargs),
                    404, "not_found")


# --- refusals ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("changes", "field"), [
    pytest.param({"cron": "61 * * * *"}, "cron", id="minute-out-of-range"),
    pytest.param({"cron": "* * *"}, "cron", id="three-fields"),
    pytest.param({"timezone": "Europe/Berlinn"}, "timezone", id="unknown-timezone"),
    pytest.param({"cron": DROP, "event": "order.created", "timezone": "Europe/Berlinn"}, "timezone",
                 id="unknown-timezone-of-an-event-task"),
    pytest.param({"cron": DROP, "event": "task.foo"}, "event", id="reserved-event-name"),
    pytest.param({"event": "task.foo"}, "event", id="reserved-event-name-with-cron"),
    pytest.param({"event": "order.created\n"}, "event", id="event-name-ending-in-a-newline"),
    pytest.param({"name": "export\n"}, "name", id="name-ending-in-a-newline"),
    pytest.param({"concurrency_policy": "sometimes"}, "concurrency_policy", id="bad-concurrency-policy"),
    pytest.param({"window": {"start": "25:00", "end": "03:00"}}, "window.start", id="window-start-25h"),
    pytest.param({"sla": {"deadline_s": 0}}, "sla.deadline_s", id="sla-deadline-zero"),
    pytest.param({"policy": {"max_attempts": 0}}, "policy.max_attempts", id="policy-max-attempts-zero"),
    pytest.param({"policy": "no-such-policy"}, "policy", id="unknown-policy-name"),
    pytest.param({"policy": {"name": [None, None]}}, "policy.name", id="policy-base-name-a-list"),
    pytest.param({"policy": {"name": 5, "max_attempts": 2}}, "policy.name", id="policy-base-name-a-number"),
    pytest.param({"priority": 5}, "priority", id="unknown-field"),
    pytest.param({"handler": "demo.nope"}, "handler", id="unknown-handler"),
    pytest.param({"jitter_s": -1}, "jitter_s", id="negative-jitter"),
    pytest.param({"paused": "false"}, "paused", id="paused-not-a-boolean"),
    # Each run of the task carries them: 70 KB was registered, though a submit refuses over 64 KiB (helper 104).
    pytest.param({"params": {"blob": "x" * 70_000}}, "params", id="params-over-the-runs-limit"),
])
def test_bad_registration_is_422_naming_the_field_and_writes_nothing(client, operator, changes, field):
    with nothing_written():
        refused(client.post("/internal/tasks/register", json=task_body(**changes), headers=operator),
                422, "invalid", field)


def test_a_task_with_neither_cron_nor_event_runs_by_hand_only(client, operator, register):
    task = register(cron=DROP)
    assert (task["cron"], task["event"], task["next_runs"]) == (None, None, [])
    response = client.post(f"/internal/tasks/{task['id']}/trigger", headers=operator)
    assert response.status_code in (200, 201, 202), response.get_data(as_text=True)


def test_duplicate_name_in_the_same_tenant_is_409(client, operator, register):
    register()
    with nothing_written():
        body = refused(client.post("/internal/tasks/register", json=task_body(cron="0 * * * *"), headers=operator),
                       409, "conflict", "name")
    assert "weekly-report" in body["detail"]


def test_renaming_a_task_to_a_name_the_tenant_uses_is_409(app, client, operator, register, monkeypatch):
    monkeypatch.setitem(app.config, "PROPAGATE_EXCEPTIONS", False)  # a server error is a status, not a raise
    register()
    other = register(name="other")
    with nothing_written():
        refused(client.put(f"/internal/tasks/{other['id']}", json={"name": "weekly-report"}, headers=operator),
                409, "conflict", "name")
    assert client.get(f"/internal/tasks/{other['id']}", headers=operator).json["name"] == "other"


def test_a_deleted_task_frees_even_the_longest_name(app, client, operator, register, monkeypatch):
    monkeypatch.setitem(app.config, "PROPAGATE_EXCEPTIONS", False)
    longest = "n" * 120
    for _ in range(2):
        task_id = register(name=longest)["id"]
        assert client.delete(f"/internal/tasks/{task_id}", headers=operator).status_code == 200
    assert register(name=longest)["name"] == longest


def test_same_name_in_another_tenant_is_allowed(client, operator, register):
    make_tenant("acme")
    first, second = register(), register(tenant="acme")
    assert (first["tenant"], second["tenant"]) == ("default", "acme")


def test_tenant_limited_token_may_not_register_for_another_tenant(client, auth):
    acme = make_tenant("acme")
    make_tenant("globex")
    headers = bearer(auth.make_user("acme-svc", "operator"), tenant=acme)
    with nothing_written():
        body = refused(client.post("/internal/tasks/register", json=task_body(tenant="globex"), headers=headers),
                       403, "forbidden", "tenant")
    assert "acme" in body["detail"]


def test_tenant_limited_token_registers_in_its_own_tenant(client, auth, register):
    acme = make_tenant("acme")
    headers = bearer(auth.make_user("acme-svc", "operator"), tenant=acme)
    assert register(headers=headers)["tenant"] == "acme"


def test_another_tenants_task_is_404_for_a_tenant_limited_token(client, auth, register):
    task_id = register()["id"]  # in the default tenant
    acme = make_tenant("acme")
    headers = bearer(auth.make_user("acme-svc", "operator"), tenant=acme)
    refused(client.get(f"/internal/tasks/{task_id}", headers=headers), 404, "not_found")
    refused(client.get(f"/internal/tasks/{task_id}/runs", headers=headers), 404, "not_found")
    with nothing_written():
        refused(client.put(f"/internal/tasks/{task_id}", json={"cron": "0 * * * *"}, headers=headers),
                404, "not_found")
        refused(client.put(f"/internal/tasks/{task_id}/pause", headers=headers), 404, "not_found")
        refused(client.post(f"/internal/tasks/{task_id}/trigger", headers=headers), 404, "not_found")
        refused(client.delete(f"/internal/tasks/{task_id}", headers=headers), 404, "not_found")


def test_viewer_token_may_read_but_not_register(client, auth, register):
    task_id = register()["id"]
    headers = bearer(auth.make_user("vic", "viewer"))
    assert client.get(f"/internal/tasks/{task_id}", headers=headers).status_code == 200
    with nothing_written():
        refused(client.post("/internal/tasks/register", json=task_body(name="other"), headers=headers),
                403, "forbidden")


# --- tasks fired by events --------------------------------------------------------------------------------------


def post_event(client, headers, **body):
    return client.post("/events", json=body, headers=headers)


def test_event_fires_the_enabled_tasks_of_its_tenant_with_data_merged_over_params(client, operator, register):
    make_tenant("acme")
    fired = register(name="on-order", cron=DROP, event="order.created", params={"order": 1, "region": "eu"})["id"]
    paused = register(name="on-order-paused", cron=DROP, event="order.created")["id"]
    client.put(f"/internal/tasks/{paused}/pause", headers=operator)
    elsewhere = register(name="on-order", cron=DROP, event="order.created", tenant="acme")["id"]
    register(name="on-refund", cron=DROP, event="order.refunded")

    response = post_event(client, operator, type="order.created", tenant="default", data={"order": 7})
    assert response.status_code == 202, response.get_data(as_text=True)
    body = response.json
    assert body["type"] == "order.created"
    outcome, skipped = body["runs"]
    assert (outcome["task_id"], outcome["status"]) == (fired, "created")
    # A paused listener is named, so the sender learns why it did not fire.
    assert skipped == {"task_id": paused, "run_id": None, "status": "paused", "reason": None}
    run = run_of(outcome["run_id"])
    assert (run.status, run.source, run.task_id) == ("pending", "event", fired)
    assert run.params == {"order": 7, "region": "eu"}
    assert runs_of(paused) == [] and runs_of(elsewhere) == []


def test_event_tasks_have_no_next_runs(client, register):
    assert register(name="on-order", cron=DROP, event="order.created")["next_runs"] == []


def test_event_nobody_listens_for_is_202_with_no_runs(client, operator, register):
    register(name="on-order", cron=DROP, event="order.created")
    with nothing_written():
        response = post_event(client, operator, type="invoice.paid", tenant="default", data={})
    assert response.status_code == 202 and response.json["runs"] == []


def test_an_event_sent_without_a_tenant_says_the_tenant_it_fired_in(client, operator, register):
    # A token of every tenant fires in `default`: a 202 with no runs said nothing of why acme's tasks did not fire.
    make_tenant("acme")
    register(name="on-order", cron=DROP, event="order.created", tenant="acme")
    response = client.post("/events", json={"type": "order.created", "data": {}}, headers=operator)
    assert response.status_code == 202 and (response.json["tenant"], response.json["runs"]) == ("default", [])


def test_debounced_task_fires_once_for_two_events_in_a_row(client, operator, register):
    task_id = register(name="on-ship", cron=DROP, event="order.shipped", debounce_s=60)["id"]
    first = post_event(client, operator, type="order.shipped", tenant="default", data={"order": 1})
    second = post_event(client, operator, type="order.shipped", tenant="default", data={"order": 2})
    assert first.status_code == second.status_code == 202
    assert [o["status"] for o in first.json["runs"]] == ["created"]
    assert [(o["task_id"], o["status"], o["run_id"]) for o in second.json["runs"]] == [(task_id, "debounced", None)]
    [run] = runs_of(task_id)
    assert run.params == {"order": 1}


def test_an_event_sent_again_with_its_idempotency_key_fires_nothing_and_names_its_runs(client, operator, register):
    first_task = register(name="on-order", cron=DROP, event="order.created")["id"]
    second_task = register(name="on-order-audit", cron=DROP, event="order.created", debounce_s=60)["id"]
    sent = post_event(client, operator, type="order.created", tenant="default", data={"order": 7},
                      idempotency_key="order-7-created")
    assert [o["status"] for o in sent.json["runs"]] == ["created", "created"]
    again = post_event(client, operator, type="order.created", tenant="default", data={"order": 7},
                       idempotency_key="order-7-created")
    assert again.status_code == 202
    # Each task's run of that event, not "debounced" for the one with a debounce: it is the same event.
    assert again.json["runs"] == [
        {"task_id": o["task_id"], "run_id": o["run_id"], "status": "duplicate", "reason": "idempotency_key sent before"}
        for o in sent.json["runs"]]
    assert len(runs_of(first_task)) == len(runs_of(second_task)) == 1
    other = post_event(client, operator, type="order.created", tenant="default", data={"order": 8},
                       idempotency_key="order-8-created")
    assert [o["status"] for o in other.json["runs"]] == ["created", "debounced"]


def test_an_event_sent_again_after_its_paused_task_resumed_fires_nothing(client, operator, register):
    # The first send fired nothing for the paused task; the sender's retry after the resume fired it (helper 151).
    task_id = register(name="on-order", cron=DROP, event="order.created")["id"]
    client.put(f"/internal/tasks/{task_id}/pause", headers=operator)
    sent = post_event(client, operator, type="order.created", tenant="default", data={}, idempotency_key="order-7")
    assert [o["status"] for o in sent.json["runs"]] == ["paused"]
    client.put(f"/internal/tasks/{task_id}/resume", headers=operator)
    again = post_event(client, operator, type="order.created", tenant="default", data={}, idempotency_key="order-7")
    assert again.json["runs"] == [{"task_id": task_id, "run_id": None, "status": "duplicate",
                                   "reason": "idempotency_key sent before, when the task was paused"}]
    assert runs_of(task_id) == []
    fresh = post_event(client, operator, type="order.created", tenant="default", data={}, idempotency_key="order-8")
    assert [o["status"] for o in fresh.json["runs"]] == ["created"]


def test_an_event_debounced_at_its_first_send_stays_unfired_when_sent_again_past_the_debounce(
        client, operator, register):
    task_id = register(name="on-ship", cron=DROP, event="order.shipped", debounce_s=60)["id"]
    post_event(client, operator, type="order.shipped", tenant="default", data={"order": 1}, idempotency_key="ship-1")
    sent = post_event(client, operator, type="order.shipped", tenant="default", data={"order": 2},
                      idempotency_key="ship-2")
    assert [o["status"] for o in sent.json["runs"]] == ["debounced"]
    get_redis().delete(f"rebound:debounce:{task_id}")  # its debounce_s has passed
    again = post_event(client, operator, type="order.shipped", tenant="default", data={"order": 2},
                       idempotency_key="ship-2")
    assert [(o["status"], o["reason"]) for o in again.json["runs"]] == [
        ("duplicate", "idempotency_key sent before, when the task was debounced")]
    assert [run.params for run in runs_of(task_id)] == [{"order": 1}]


def test_an_event_sent_again_while_its_first_send_is_answered_is_a_duplicate_not_debounced(client, operator,
                                                                                            register):
    # Six identical sends at one instant: those that found the first's debounce but not yet its run answered
    # "debounced", a state a resend never had (helper 157). The debounce holds the key of the event that took it.
    task_id = register(name="on-ship", cron=DROP, event="order.shipped", debounce_s=60)["id"]
    get_redis().set(f"rebound:debounce:{task_id}", f"event:{task_id}:ship-1", ex=60)  # the first send, in flight
    same = post_event(client, operator, type="order.shipped", tenant="default", data={}, idempotency_key="ship-1")
    assert same.json["runs"] == [{"task_id": task_id, "run_id": None, "status": "duplicate",
                                  "reason": "idempotency_key sent at the same moment"}]
    other = post_event(client, operator, type="order.shipped", tenant="default", data={}, idempotency_key="ship-2")
    assert [o["status"] for o in other.json["runs"]] == ["debounced"]  # another event within the debounce
    assert runs_of(task_id) == []
    assert db.session.execute(select(EventReceipt.idempotency_key)).scalars().all() == ["ship-2"]


def test_what_an_event_did_not_fire_is_forgotten_after_a_week(client, operator, register):
    task_id = register(name="on-order", cron=DROP, event="order.created")["id"]
    client.put(f"/internal/tasks/{task_id}/pause", headers=operator)
    post_event(client, operator, type="order.created", tenant="default", data={}, idempotency_key="order-7")
    client.put(f"/internal/tasks/{task_id}/resume", headers=operator)
    in_six_days = datetime.now(UTC) + timedelta(days=6)
    assert event_receipts.expire(lambda: in_six_days) == 0
    assert event_receipts.expire(lambda: in_six_days + timedelta(days=2)) == 1
    again = post_event(client, operator, type="order.created", tenant="default", data={}, idempotency_key="order-7")
    assert [o["status"] for o in again.json["runs"]] == ["created"]


@pytest.mark.parametrize(("body", "field"), [
    ({"dat": {"order": 7}}, "dat"), ({"idempotency_key": ""}, "idempotency_key"),
    ({"idempotency_key": "k" * 184}, "idempotency_key"), ({"idempotency_key": 7}, "idempotency_key"),
])
def test_an_event_with_an_unknown_field_or_a_bad_key_is_422_and_fires_nothing(client, operator, register, body,
                                                                             field):
    register(name="on-order", cron=DROP, event="order.created")
    with nothing_written():
        refused(post_event(client, operator, type="order.created", tenant="default", **body), 422, "invalid", field)


@pytest.mark.parametrize("kind", ["task.anything", "", 5])
def test_reserved_or_missing_event_type_is_422(client, operator, register, kind):
    register(name="on-order", cron=DROP, event="order.anything")
    with nothing_written():
        refused(post_event(client, operator, type=kind, tenant="default", data={"order": 7}), 422, "invalid", "type")


def test_event_data_that_is_not_an_object_is_422(client, operator, register):
    register(name="on-order", cron=DROP, event="order.created")
    with nothing_written():
        refused(post_event(client, operator, type="order.created", tenant="default", data=[7]), 422, "invalid", "data")


def test_tenant_limited_token_may_not_fire_another_tenants_event_tasks(client, auth, register):
    acme = make_tenant("acme")
    register(name="on-order", cron=DROP, event="order.created")
    headers = bearer(auth.make_user("acme-svc", "operator"), tenant=acme)
    with nothing_written():
        refused(post_event(client, headers, type="order.created", tenant="default", data={}), 403, "forbidden",
                "tenant")


def test_a_put_naming_another_tenant_is_a_422_not_silently_ignored(client, operator, register):
    make_tenant("globex")
    task_id = register()["id"]
    same = client.put(f"/internal/tasks/{task_id}", json={"tenant": "default", "jitter_s": 5}, headers=operator)
    assert same.status_code == 200 and same.json["jitter_s"] == 5
    with nothing_written():
        body = refused(client.put(f"/internal/tasks/{task_id}", json={"tenant": "globex", "jitter_s": 9},
                                  headers=operator), 422, "invalid", "tenant")
    assert body["detail"] == "a task stays in its tenant (default); register a new task in the other one"


def test_a_name_and_cron_are_stored_trimmed_so_a_space_makes_no_second_task(client, operator, register):
    register(name="nightly", cron="0 2 * * *")
    again = client.post("/internal/tasks/register", json=task_body(name="nightly ", cron="  0   2 * * *  "),
                        headers=operator)
    assert again.status_code == 409, again.json  # the same name: not a second task beside it
    spaced = register(name=" weekly ", cron="  0   3 * * MON  ")
    assert (spaced["name"], spaced["cron"]) == ("weekly", "0 3 * * MON")


def test_an_edit_that_changes_nothing_leaves_updated_at_so_no_one_gets_a_false_conflict(client, operator, register):
    made = register()
    same = client.put(f"/internal/tasks/{made['id']}", json={"cron": made["cron"]}, headers=operator)
    assert same.status_code == 200 and same.json["updated_at"] == made["updated_at"]
    careful = client.put(f"/internal/tasks/{made['id']}", headers=operator,
                         json={"cron": "0 4 * * *", "base_updated_at": made["updated_at"]})
    assert careful.status_code == 200, careful.json


def test_a_task_moves_from_one_named_policy_to_another(client, operator, register):
    """It answered 200 with the old policy, and wrote no audit row (helper 97)."""
    for name in ("quick-one", "slow-one"):
        assert client.put(f"/internal/policies/{name}", json={"max_attempts": 2}, headers=operator).status_code == 201
    created = register(policy="quick-one")
    moved = client.put(f"/internal/tasks/{created['id']}", json={"policy": "slow-one"}, headers=operator)
    assert moved.status_code == 200 and moved.json["policy"] == "slow-one", moved.json
    [entry] = audit_rows("task.edit", created["id"])
    assert entry.before["policy"] == {"name": "quick-one"} and entry.after["policy"] == {"name": "slow-one"}
