"""What an API client lists and follows: runs, tasks and work orders, keyset-paged and kept to the token's tenant;
a work order acknowledged and closed over the API."""

from datetime import timedelta

import pytest
from sqlalchemy import event, select

from console.extensions import db
from console.models import AuditEntry, Run, WorkOrder
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.people import tenants, users
from console.services.scheduling import tasks, templates
from tests import api_checks
from tests.factories import BROKEN, LENIENT, Runs, bearer, make_tenant


@pytest.fixture
def runs(app):
    return Runs()


@pytest.fixture
def operator(auth):
    """An operator who sees every tenant; `bearer(operator)` is a token of hers."""
    return auth.make_user("olga", "operator")


def dead_run(runs, clock, tenant: str = "default") -> int:
    run_id = runs.submit("demo.flaky", BROKEN, policy=LENIENT, tenant=tenant)
    assert execute(run_id, 0, clock=clock) == "dead"
    return run_id


def test_a_runs_until_given_as_a_bare_date_takes_that_whole_day(client, operator, runs, clock):
    run_id = runs.submit("demo.noop", {})
    day = db.session.get(Run, run_id).created_at.date()
    listed = client.get("/api/runs", query_string={"since": f"{day}", "until": f"{day}"}, headers=bearer(operator))
    assert listed.status_code == 200, listed.json
    assert [run["id"] for run in listed.json["runs"]] == [run_id]
    earlier = client.get("/api/runs", query_string={"until": f"{day}T00:00"}, headers=bearer(operator))
    assert earlier.json["runs"] == []  # a time is that moment


def test_runs_list_newest_first_by_keyset_with_filters_and_the_tokens_tenant_only(client, operator, runs, clock):
    acme = make_tenant("acme")
    waiting = [runs.submit("demo.noop", {"n": n}) for n in range(3)]
    dead = dead_run(runs, clock)
    theirs = runs.submit("demo.noop", {}, tenant="acme")
    headers = bearer(operator)
    first = client.get("/api/runs?limit=2", headers=headers).json
    assert [run["id"] for run in first["runs"]] == [theirs, dead]
    rest = client.get(f"/api/runs?limit=2&before={first['next_before']}", headers=headers).json
    assert [run["id"] for run in rest["runs"]] == waiting[::-1][:2]
    assert rest["runs"][0]["handler"] == "python:demo.noop"
    found = client.get("/api/runs?status=dead,succeeded", headers=headers).json["runs"]
    assert [(run["id"], run["status"], run["error"]["code"]) for run in found] == [(dead, "dead", "bad_account")]
    assert [r["id"] for r in client.get("/api/runs?code=bad_account", headers=headers).json["runs"]] == [dead]
    assert [r["id"] for r in client.get("/api/runs?tenant=acme", headers=headers).json["runs"]] == [theirs]
    scoped = bearer(users.create("acme-svc", "viewer", "correct-horse-battery", Actor("test"), tenant=acme)[0], acme)
    assert [r["id"] for r in client.get("/api/runs", headers=scoped).json["runs"]] == [theirs]
    api_checks.refused(client.get("/api/runs?tenant=default", headers=scoped), 403, "forbidden", "tenant")


def test_runs_list_finds_text_as_the_runs_page_does(client, operator, runs):
    """The Runs page found a run by its key; the API answered ?q= with a 422 (helper 96)."""
    keyed = runs.submit("demo.noop", {}, idempotency_key="charge-1001")
    runs.submit("demo.noop", {}, idempotency_key="charge-2002")
    found = client.get("/api/runs?q=CHARGE-1001", headers=bearer(operator)).json
    assert [run["id"] for run in found["runs"]] == [keyed] and found["next_before"] is None
    api_checks.refused(client.get(f"/api/runs?q={'x' * 201}", headers=bearer(operator)), 422, "invalid", "q")


def test_runs_list_reads_times_to_the_second(client, operator, runs, clock):
    early, late = runs.submit("demo.noop", {}), runs.submit("demo.noop", {})
    moment = clock().replace(microsecond=0)
    for run_id, second in ((early, 5), (late, 9)):
        db.session.execute(Run.__table__.update().where(Run.id == run_id)
                           .values(created_at=moment.replace(second=second)))
    db.session.commit()
    headers = bearer(operator)
    since = client.get("/api/runs", query_string={"since": f"{moment.replace(second=9).isoformat()}"}, headers=headers)
    assert [r["id"] for r in since.json["runs"]] == [late]
    until = client.get("/api/runs", query_string={"until": f"{moment.replace(second=9):%Y-%m-%dT%H:%M:%S}Z"},
                       headers=headers)
    assert [r["id"] for r in until.json["runs"]] == [early]
    # An offset is read, as the refusal's example says: the same moment an hour east of UTC.
    east = (moment.replace(second=9) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S+01:00")
    assert [r["id"] for r in client.get("/api/runs", query_string={"since": east}, headers=headers).json["runs"]] == [
        late]
    refused = client.get("/api/runs?since=yesterday", headers=headers).json["detail"]
    assert refused == ("since is an ISO 8601 time such as 2026-12-04T16:15:08Z or 2026-12-04T17:15:08+01:00 (UTC when "
                       "it gives no offset)")


@pytest.mark.parametrize(("query", "field"), [
    ("status=done", "status"), ("limit=0", "limit"), ("limit=201", "limit"), ("limit=x", "limit"),
    ("before=-1", "before"), ("task=abc", "task"), ("since=yesterday", "since"), ("until=0001-01-01T00:00", "until"),
    ("since=2026-01-02T00:00&until=2026-01-01T00:00", "until"), ("colour=red", "colour"), ("tenant=nope", "tenant"),
    ("code=" + "x" * 81, "code"), ("task=1&handler=demo.noop", "handler"), ("handler=nope:x", "handler"),
    ("task=4318647903", "task"),
])
def test_runs_list_refuses_what_it_cannot_read_naming_the_parameter(client, operator, query, field):
    response = client.get(f"/api/runs?{query}", headers=bearer(operator))
    assert response.status_code in (404, 422), response.json
    assert response.json["field"] == field, response.json


def test_tasks_list_by_tenant_status_and_handler_with_their_next_firing_and_newest_run(client, operator, runs):
    acme = make_tenant("acme")
    nightly = tasks.register(tenants.find("default"), {"name": "nightly", "handler": "demo.noop",
                                                       "cron": "0 2 * * *"}, Actor("test"))
    paused = tasks.register(tenants.find("default"), {"name": "on-order", "handler": "demo.flaky",
                                                      "event": "order.created", "paused": True}, Actor("test"))
    theirs = tasks.register(acme, {"name": "nightly", "handler": "demo.noop"}, Actor("test"))
    run_id = runs.submit(None, {}, task=nightly)
    headers = bearer(operator)
    listed = client.get("/internal/tasks", headers=headers).json
    assert [task["id"] for task in listed["tasks"]] == [theirs.id, paused.id, nightly.id]
    assert listed["next_before"] is None
    shown = {task["id"]: task for task in listed["tasks"]}
    assert shown[nightly.id]["last_run"]["id"] == run_id and len(shown[nightly.id]["next_runs"]) == 1
    assert shown[paused.id]["last_run"] is None and shown[paused.id]["next_runs"] == []
    assert [t["id"] for t in client.get("/internal/tasks?status=paused", headers=headers).json["tasks"]] == [
        paused.id]
    assert [t["id"] for t in client.get("/internal/tasks?handler=demo.noop&tenant=default",
                                        headers=headers).json["tasks"]] == [nightly.id]
    page = client.get("/internal/tasks?limit=1", headers=headers).json
    assert [t["id"] for t in client.get(f"/internal/tasks?before={page['next_before']}&limit=5",
                                        headers=headers).json["tasks"]] == [paused.id, nightly.id]
    scoped = bearer(users.create("acme-svc", "viewer", "correct-horse-battery", Actor("test"), tenant=acme)[0], acme)
    assert [t["id"] for t in client.get("/internal/tasks", headers=scoped).json["tasks"]] == [theirs.id]
    api_checks.refused(client.get("/internal/tasks?status=sleeping", headers=headers), 422, "invalid", "status")
    api_checks.refused(client.get(f"/internal/tasks/{nightly.id}/runs?limit=-1", headers=headers), 422, "invalid",
                       "limit")


def test_a_runs_page_gives_the_params_it_runs_with(client, operator, runs):
    run_id = runs.submit("demo.noop", {"account": 42})
    assert client.get(f"/worker/tasks/{run_id}", headers=bearer(operator)).json["params"] == {"account": 42}


def test_work_orders_are_listed_read_acknowledged_and_closed_and_each_change_is_audited(client, operator, runs,
                                                                                          clock):
    make_tenant("acme")
    first, second = dead_run(runs, clock), dead_run(runs, clock)
    dead_run(runs, clock, tenant="acme")
    headers = bearer(operator)
    listed = client.get("/api/work-orders?tenant=default", headers=headers).json
    [order] = listed["work_orders"]
    assert (order["status"], order["dead_letters_total"], order["dead_letters_open"], order["assignee"]) == (
        "open", 2, 2, None)
    one = client.get(f"/api/work-orders/{order['id']}", headers=headers).json
    assert {letter["run_id"] for letter in one["dead_letters"]} == {first, second}
    acknowledged = client.post(f"/api/work-orders/{order['id']}/acknowledge", headers=headers)
    assert acknowledged.status_code == 200 and (acknowledged.json["status"], acknowledged.json["assignee"]) == (
        "acknowledged", "olga")
    again = client.post(f"/api/work-orders/{order['id']}/acknowledge", headers=headers)
    api_checks.refused(again, 409, "conflict", "status")
    api_checks.refused(client.post(f"/api/work-orders/{order['id']}/close", json={}, headers=headers), 422,
                       "invalid", "note")
    closed = client.post(f"/api/work-orders/{order['id']}/close", json={"note": "account reopened by hand"},
                         headers=headers)
    assert closed.status_code == 200 and closed.json["status"] == "closed"
    assert closed.json["closed_by"].startswith("olga (token rb_")  # whose token, as the console's audit log says
    assert client.get("/api/work-orders?tenant=default", headers=headers).json["work_orders"] == []
    assert len(client.get("/api/work-orders?status=closed", headers=headers).json["work_orders"]) == 1
    actions = db.session.execute(select(AuditEntry.action, AuditEntry.actor).where(
        AuditEntry.target_id == str(order["id"]), AuditEntry.target_type == "work_order")).all()
    assert [(action, actor.split(" ")[0]) for action, actor in sorted(actions)] == [
        ("work_order.acknowledge", "olga"), ("work_order.close", "olga")]


def test_a_work_order_of_another_tenant_is_not_found_and_a_viewer_may_not_change_one(client, runs, clock):
    acme = make_tenant("acme")
    dead_run(runs, clock)
    order_id = db.session.execute(select(WorkOrder.id)).scalar_one()
    scoped = bearer(users.create("acme-svc", "operator", "correct-horse-battery", Actor("test"), tenant=acme)[0], acme)
    api_checks.refused(client.get(f"/api/work-orders/{order_id}", headers=scoped), 404, "not_found")
    api_checks.refused(client.post(f"/api/work-orders/{order_id}/acknowledge", headers=scoped), 404, "not_found")
    assert client.get("/api/work-orders", headers=scoped).json["work_orders"] == []
    viewer = bearer(users.create("vera", "viewer", "correct-horse-battery", Actor("test"))[0])
    assert client.post(f"/api/work-orders/{order_id}/acknowledge", headers=viewer).status_code == 403
    api_checks.refused(client.get("/api/work-orders?status=done", headers=viewer), 422, "invalid", "status")
    db.session.expire_all()
    assert db.session.get(WorkOrder, order_id).status == "open"


def test_a_work_order_is_assigned_over_the_api_as_on_its_page(client, operator, runs, clock):
    """The console's Assign had no API; the roles table says operators assign work orders (helper 154)."""
    acme = make_tenant("acme")
    dead_run(runs, clock)
    order_id = db.session.execute(select(WorkOrder.id)).scalar_one()
    users.create("pete", "operator", "correct-horse-battery", Actor("test"))
    users.create("acme-ann", "operator", "correct-horse-battery", Actor("test"), tenant=acme)
    headers = bearer(operator)
    path = f"/api/work-orders/{order_id}/assign"
    given = client.post(path, json={"assignee": "pete"}, headers=headers)
    assert given.status_code == 200 and given.json["assignee"] == "pete"
    stale = client.post(path, json={"assignee": "olga", "seen": None}, headers=headers)  # read before pete had it
    assert api_checks.refused(stale, 409, "conflict", "seen")["detail"].startswith(
        f"work order #{order_id} is assigned to pete, not nobody")
    taken = client.post(path, json={"assignee": "olga", "seen": "pete"}, headers=headers)
    assert taken.status_code == 200 and taken.json["assignee"] == "olga"
    assert client.post(path, json={"assignee": None}, headers=headers).json["assignee"] is None
    # Another tenant's person and a name nobody has read alike: a token learns no one's name from it.
    for name in ("acme-ann", "nobody-at-all"):
        refused = api_checks.refused(client.post(path, json={"assignee": name}, headers=headers), 422, "invalid",
                                     "assignee")
        assert refused["detail"].startswith("assignee is the username of an active operator, approver or admin")
    api_checks.refused(client.post(path, json={}, headers=headers), 422, "invalid", "assignee")
    api_checks.refused(client.post(path, json={"assignee": "pete", "who": 1}, headers=headers), 422, "invalid", "who")
    # A seen that is no username is a mistake to fix, not a change of the work order's to look at (helper 163).
    api_checks.refused(client.post(path, json={"assignee": "pete", "seen": 12345}, headers=headers), 422, "invalid",
                       "seen")
    viewer = bearer(users.create("vera", "viewer", "correct-horse-battery", Actor("test"))[0])
    assert client.post(path, json={"assignee": "pete"}, headers=viewer).status_code == 403
    rows = db.session.execute(select(AuditEntry.before, AuditEntry.after).where(
        AuditEntry.action == "work_order.assign").order_by(AuditEntry.seq)).all()
    assert [(before["assignee"], after["assignee"]) for before, after in rows] == [
        (None, "pete"), ("pete", "olga"), ("olga", None)]


def test_ids_past_any_row_are_a_422_as_a_filter_and_no_bound_as_a_cursor(client, operator, runs, clock):
    dead_run(runs, clock)
    headers = bearer(operator)
    for path in ("/api/runs", "/api/work-orders", "/internal/tasks", "/api/approvals"):
        assert client.get(f"{path}?before=4318647903", headers=headers).status_code == 200, path
    for path in ("/api/runs", "/api/work-orders"):
        api_checks.refused(client.get(f"{path}?task=4318647903", headers=headers), 422, "invalid", "task")
    assert len(client.get("/api/runs?before=4318647903", headers=headers).json["runs"]) == 1


def test_tasks_sharing_a_template_read_it_once_for_the_list(client, operator, app):
    templates.save("nightly", {"mutex_key": "ledger"}, Actor("test"))
    for n in range(3):
        tasks.register(tenants.find("default"), {"name": f"export-{n}", "handler": "demo.noop", "template": "nightly"},
                       Actor("test"))
    seen = []
    listener = lambda *args: seen.append(args[2])  # noqa: E731 - (conn, cursor, statement, ...)
    event.listen(db.engine, "before_cursor_execute", listener)
    try:
        listed = client.get("/internal/tasks", headers=bearer(operator)).json["tasks"]
    finally:
        event.remove(db.engine, "before_cursor_execute", listener)
    assert [task["template"] for task in listed] == ["nightly"] * 3
    assert len([statement for statement in seen if "conflict_templates" in statement]) == 1


def test_notes_are_added_to_a_work_order_and_read_with_it_over_the_api(client, operator, runs, clock):
    acme = make_tenant("acme")
    dead_run(runs, clock)
    order_id = db.session.execute(select(WorkOrder.id)).scalar_one()
    headers = bearer(operator)
    added = client.post(f"/api/work-orders/{order_id}/notes", json={"note": "retried the export by hand"},
                        headers=headers)
    assert added.status_code == 201 and added.headers["Location"] == f"/api/work-orders/{order_id}"
    assert added.json["author"].startswith("olga (token rb_") and added.json["note"] == "retried the export by hand"
    read = client.get(f"/api/work-orders/{order_id}", headers=headers).json["notes"]
    assert [note["note"] for note in read] == ["retried the export by hand"]
    for refused, field in (({}, "note"), ({"note": 7}, "note"), ({"note": "x" * 2001}, "note"),
                           ({"note": "ok", "by": "me"}, "by")):
        api_checks.refused(client.post(f"/api/work-orders/{order_id}/notes", json=refused, headers=headers), 422,
                           "invalid", field)
    theirs = bearer(users.create("acme-ann", "operator", "correct-horse-battery", Actor("test"), tenant=acme)[0])
    assert client.post(f"/api/work-orders/{order_id}/notes", json={"note": "hi"}, headers=theirs).status_code == 404
    viewer = bearer(users.create("vera", "viewer", "correct-horse-battery", Actor("test"))[0])
    assert client.post(f"/api/work-orders/{order_id}/notes", json={"note": "hi"}, headers=viewer).status_code == 403
    assert len(client.get(f"/api/work-orders/{order_id}", headers=headers).json["notes"]) == 1


def test_a_task_filter_naming_no_task_the_token_may_see_is_a_422_as_on_the_pages(client, operator, runs, clock):
    acme = make_tenant("acme")
    theirs = tasks.register(acme, {"name": "nightly", "handler": "demo.noop"}, Actor("test"))
    ours = tasks.register(tenants.find("default"), {"name": "nightly", "handler": "demo.noop"}, Actor("test"))
    gone = tasks.register(tenants.find("default"), {"name": "gone", "handler": "demo.noop"}, Actor("test"))
    gone_run = runs.submit(None, {}, task=gone)
    tasks.delete(gone, Actor("test"))
    scoped = bearer(users.create("dora", "operator", "correct-horse-battery", Actor("test"),
                                 tenant=tenants.find("default"))[0])
    for path in ("/api/runs", "/api/work-orders", "/api/dead-letters"):
        for task_id, headers in ((999_999, bearer(operator)), (theirs.id, scoped)):
            refused = client.get(f"{path}?task={task_id}", headers=headers)
            api_checks.refused(refused, 422, "invalid", "task")
            assert f"no task with id {task_id} that you can see" in refused.json["detail"], (path, refused.json)
        assert client.get(f"{path}?task={ours.id}", headers=scoped).status_code == 200, path
        assert client.get(f"{path}?task={theirs.id}", headers=bearer(operator)).status_code == 200, path
    # A deleted task's runs remain, so it may still be filtered by.
    assert [r["id"] for r in client.get(f"/api/runs?task={gone.id}", headers=scoped).json["runs"]] == [gone_run]
