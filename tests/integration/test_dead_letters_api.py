"""The DLQ over the API: list with filters and keyset paging, read one, replay or discard, ask for a fix."""

from datetime import timedelta

import pytest
from sqlalchemy import select

from console.extensions import db
from console.models import Approval, AuditEntry, DeadLetter
from console.services.actor import Actor
from console.services.engine import control
from console.services.engine.execute import execute
from console.services.people import tenants, users
from console.services.recovery import params_fix
from console.services.scheduling import tasks
from console.services.system import console_settings
from tests import api_checks
from tests.factories import Runs, bearer, make_tenant

LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}


@pytest.fixture
def runs(app):
    return Runs()


@pytest.fixture
def operator(app):
    user, _ = users.create("olga", "operator", "correct-horse-battery", Actor("test"))
    return user


@pytest.fixture
def dead(runs, clock):
    """Make a real dead letter: a run whose handler fails for good."""

    def make(code: str = "fatal", message: str = "account 7 is closed", tenant: str = "default") -> DeadLetter:
        run_id = runs.submit("demo.flaky", {"fail_times": 9, "error": "fatal", "code": code, "message": message},
                             tenant=tenant, policy=LENIENT)
        assert execute(run_id, 0, clock=clock) == "dead"
        return runs.dead_letters(run_id)[0]

    return make


def test_list_filters_by_code_and_handler_and_pages_by_keyset(client, operator, dead):
    letters = [dead("db_timeout") for _ in range(3)] + [dead("bad_account")]
    headers = bearer(operator)
    first = client.get("/api/dead-letters?code=db_timeout&limit=2", headers=headers)
    assert first.status_code == 200
    page = first.get_json()
    assert [d["id"] for d in page["dead_letters"]] == [letters[2].id, letters[1].id]
    assert page["dead_letters"][0]["error"]["code"] == "db_timeout" and page["dead_letters"][0]["status"] == "open"
    rest = client.get(f"/api/dead-letters?code=db_timeout&limit=2&after={page['next']}", headers=headers).get_json()
    assert [d["id"] for d in rest["dead_letters"]] == [letters[0].id] and rest["next"] is None
    by_handler = client.get("/api/dead-letters?handler=demo.flaky", headers=headers).get_json()
    assert len(by_handler["dead_letters"]) == 4
    assert client.get("/api/dead-letters?handler=demo.noop", headers=headers).get_json()["dead_letters"] == []
    created = letters[0].created_at.strftime("%Y-%m-%dT%H:%M")
    window = client.get(f"/api/dead-letters?status=any&since={created}", headers=headers).get_json()
    assert len(window["dead_letters"]) == 4 and window["filter"].startswith(f"dead letters created from {created}")


def test_recovered_lists_the_letters_whose_run_succeeded_after_them(client, operator, runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 1, "error": "fatal"}, policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    dead_again = runs.submit("demo.flaky", {"fail_times": 9, "error": "fatal"}, policy=LENIENT)
    assert execute(dead_again, 0, clock=clock) == "dead"
    for letter in (runs.dead_letters(run_id)[0], runs.dead_letters(dead_again)[0]):
        control.replay(letter, Actor("olga"), clock=clock)
    clock.advance(60)
    assert execute(run_id, 0, clock=clock) == "succeeded"
    assert execute(dead_again, 0, clock=clock) == "dead"
    since = clock().strftime("%Y-%m-%dT%H:%M")
    found = client.get(f"/api/dead-letters?status=any&recovered_since={since}", headers=bearer(operator)).get_json()
    assert [d["run_id"] for d in found["dead_letters"]] == [run_id]
    assert found["filter"] == f"dead letters recovered from {since} UTC"


@pytest.mark.parametrize("query, field", [
    ("status=gone", "status"), ("limit=0", "limit"), ("limit=100000", "limit"), ("after=-1", "after"),
    ("after=99999999999999999999999", "after"), ("age=2d", "age"), ("group=xyz", "group"),
    ("handler=a&task=1", "handler"), ("colour=red", "colour"), ("since=yesterday", "since"),
    ("until=2026-13-01T00:00", "until"), ("recovered_since=soon", "recovered_since"),
    ("task=99999999999999999999", "task"), ("task=%C2%B2", "task"), ("task=0", "task"),
    ("since=0001-01-01T00:00", "since"), ("until=9999-12-31T23:59", "until"),
    ("recovered_since=0001-01-01T00:00", "recovered_since"), ("recovered_until=9999-12-31T23:59", "recovered_until"),
    ("since=9999-12-31T23:59-05:00", "since"), ("alerted_since=soon", "alerted_since"),
    ("alerted_until=9999-12-31T23:59", "alerted_until"), ("tenant=nope", "tenant"),
])
def test_bad_filters_are_refused_with_the_field_to_fix(client, operator, query, field):
    response = client.get(f"/api/dead-letters?{query}", headers=bearer(operator))
    assert response.status_code == 422, response.get_json()  # an unknown parameter too: it was ignored
    assert response.get_json()["field"] == field


def test_a_tenant_token_sees_only_its_tenant_and_cannot_name_another(client, operator, dead):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    own, other = dead(tenant="acme"), dead(tenant="globex")
    headers = bearer(operator, tenant=acme)
    listed = client.get("/api/dead-letters", headers=headers).get_json()["dead_letters"]
    assert [d["id"] for d in listed] == [own.id]
    assert client.get("/api/dead-letters?tenant=globex", headers=headers).status_code == 403
    assert client.get(f"/api/dead-letters/{other.id}", headers=headers).status_code == 404
    assert client.post(f"/api/dead-letters/{other.id}/replay", headers=headers).status_code == 404
    refused = client.post("/api/dead-letters/replay", json={"filter": {"tenant": globex.name}}, headers=headers)
    assert refused.status_code == 403 and refused.get_json()["field"] == "tenant"
    # Chosen by id, another tenant's letter is left out, and the operation says so without saying whose it is.
    mixed = client.post("/api/dead-letters/replay", json={"ids": [own.id, other.id]}, headers=headers).get_json()
    assert mixed["total"] == 1
    assert mixed["selection"] == (f"selected dead letters {own.id} (1 of the 2 chosen left out: not open, or not "
                                  "found here)")


def test_one_letter_reads_with_its_run_and_params_and_replays(client, operator, dead, runs, clock):
    letter = dead()
    headers = bearer(operator)
    body = client.get(f"/api/dead-letters/{letter.id}", headers=headers).get_json()
    assert body["params"]["fail_times"] == 9 and body["run"]["status"] == "dead"
    task = client.get(f"/worker/tasks/{letter.run_id}", headers=headers).get_json()
    assert (task["dead_letter_id"], task["mode"]) == (letter.id, "standalone")
    assert task["series_started_at"] == task["started_at"] is not None
    replayed = client.post(f"/api/dead-letters/{letter.id}/replay", headers=headers)
    assert replayed.status_code == 202
    assert replayed.get_json() == {"dead_letter_id": letter.id, "run_id": letter.run_id, "status": "pending",
                                   "series": 2, "closed_fixes": [], "workflow": None}
    again = client.post(f"/api/dead-letters/{letter.id}/replay", headers=headers)
    assert again.status_code == 409
    # started_at stays series 1's; series_started_at says when the replay itself started (null while it waits).
    waiting = client.get(f"/worker/tasks/{letter.run_id}", headers=headers).get_json()
    assert (waiting["series_started_at"], waiting["started_at"]) == (None, task["started_at"])
    clock.advance(600)
    assert execute(letter.run_id, 0, clock=clock) == "dead"
    replay = client.get(f"/worker/tasks/{letter.run_id}", headers=headers).get_json()
    assert replay["series_started_at"] == clock().isoformat() != replay["started_at"] == task["started_at"]


def test_a_replay_over_the_api_closes_the_params_fix_waiting_on_its_letter_and_says_which(client, operator, dead):
    letter = dead()
    request = params_fix.request_fix(letter.id, {"fail_times": 0}, "the account was reopened",
                                     Actor(operator.username, operator.id))
    replayed = client.post(f"/api/dead-letters/{letter.id}/replay", headers=bearer(operator))
    assert replayed.status_code == 202 and replayed.get_json()["closed_fixes"] == [request.id]
    db.session.expire_all()
    assert db.session.get(Approval, request.id).status == "superseded"


def test_replay_all_matching_starts_an_operation_whose_progress_is_readable(client, operator, dead):
    for _ in range(3):
        dead("db_timeout")
    dead("bad_account")
    headers = bearer(operator)
    started = client.post("/api/dead-letters/replay", json={"filter": {"code": "db_timeout"}, "rate_per_s": 100},
                          headers=headers)
    assert started.status_code == 202, started.get_json()
    operation = started.get_json()
    assert (operation["status"], operation["total"], operation["rate_per_s"]) == ("queued", 3, 100)
    progress = client.get(f"/api/operations/{operation['operation_id']}", headers=headers)
    assert progress.status_code == 200 and progress.get_json()["total"] == 3
    assert client.get("/api/operations/ffffffffffff", headers=headers).status_code == 404


@pytest.mark.parametrize("payload, field", [
    ({}, "filter"), ({"filter": {}, "ids": [1]}, "filter"), ({"filter": "code=x"}, "filter"),
    ({"ids": ["1"]}, "ids"), ({"filter": {"status": "replayed"}}, "status"), ({"filter": {"code": 5}}, "code"),
    ({"filter": {"code": "x"}, "rate_per_s": 5000}, "rate_per_s"), ({"filter": {"code": "x"}, "speed": 1}, "speed"),
    ({"filter": {"code": "x"}, "rate_per_s": 10 ** 400}, "rate_per_s"),  # float() raised OverflowError: a 500
    ({"filter": {}}, "filter"), ({"filter": {"status": "open", "code": ""}}, "filter"),
    ({"filter": {}, "every": "yes"}, "every"), ({"filter": {"q": "x" * 201}}, "q"),
    ({"filter": {"code": "x" * 81}}, "code"), ({"ids": []}, "ids"),  # was "id", the console form's name
    ({"filter": {"code": "nothing-open"}}, "filter"),  # also "id" (helper 135)
    ({"filter": {"code": "x"}, "rate_per_s": True}, "rate_per_s"), ({"filter": {"code": "x"}, "rate_per_s": "5"},
                                                                    "rate_per_s"),  # both read as numbers
])
def test_bad_bulk_replays_are_refused_and_start_nothing(client, operator, payload, field):
    response = client.post("/api/dead-letters/replay", json=payload, headers=bearer(operator))
    assert response.status_code == 422, response.get_json()
    assert response.get_json()["field"] == field


def test_an_empty_filter_replays_every_open_letter_only_when_every_says_so(client, operator, dead):
    for code in ("db_timeout", "bad_account"):
        dead(code)
    refused = client.post("/api/dead-letters/replay", json={"filter": {}}, headers=bearer(operator))
    assert "send \"every\": true to mean all of them" in api_checks.refused(refused, 422, "invalid", "filter")["detail"]
    assert db.session.query(DeadLetter).filter_by(status="open").count() == 2  # nothing replayed
    started = client.post("/api/dead-letters/replay", json={"filter": {}, "every": True}, headers=bearer(operator))
    assert started.status_code == 202 and started.get_json()["total"] == 2


def test_since_and_until_keep_the_seconds_a_client_pages_by(client, operator, dead, clock):
    letters = [dead() for _ in range(3)]
    minute = clock().replace(second=0, microsecond=0)
    for second, letter in zip((5, 8, 8), letters, strict=True):
        db.session.query(DeadLetter).filter_by(id=letter.id).update(
            {"created_at": minute.replace(second=second, microsecond=250_000 * (letter.id % 2))})
    db.session.commit()
    headers = bearer(operator)
    listed = {d["id"]: d["created_at"] for d in client.get("/api/dead-letters", headers=headers).get_json()[
        "dead_letters"]}
    since = client.get("/api/dead-letters", query_string={"since": listed[letters[1].id]}, headers=headers).get_json()
    assert [d["id"] for d in since["dead_letters"]] == [letter.id for letter in letters[1:][::-1]
                                                       if listed[letter.id] >= listed[letters[1].id]]
    until = client.get("/api/dead-letters", query_string={"until": f"{minute:%Y-%m-%dT%H:%M}:08"},
                       headers=headers).get_json()
    assert [d["id"] for d in until["dead_letters"]] == [letters[0].id]
    assert until["filter"] == f"open dead letters created before {minute:%Y-%m-%dT%H:%M}:08 UTC"


def test_an_until_given_as_a_bare_date_takes_that_whole_day_as_the_pages_do(client, operator, dead, clock):
    letter = dead()
    day = letter.created_at.date()
    headers = bearer(operator)
    same_day = client.get("/api/dead-letters", query_string={"since": f"{day}", "until": f"{day}"},
                          headers=headers).get_json()
    assert [d["id"] for d in same_day["dead_letters"]] == [letter.id]
    assert same_day["filter"].endswith(f"created before {day + timedelta(days=1)}T00:00 UTC")
    before = client.get("/api/dead-letters", query_string={"until": f"{day - timedelta(days=1)}"}, headers=headers)
    assert before.get_json()["dead_letters"] == []


def test_a_task_filter_takes_the_task_id_as_a_number_too(client, operator, dead, runs, clock):
    task = tasks.register(tenants.find("default"), {"name": "nightly", "handler": "demo.flaky"}, Actor("test"))
    run_id = runs.submit(None, {"fail_times": 9, "error": "fatal", "code": "bad_account"}, task=task,
                         policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    dead("db_timeout")  # another letter, of no task
    started = client.post("/api/dead-letters/replay", json={"filter": {"task": task.id}}, headers=bearer(operator))
    assert started.status_code == 202 and started.get_json()["total"] == 1, started.get_json()
    huge = client.post("/api/dead-letters/replay", json={"filter": {"task": 10**30}}, headers=bearer(operator))
    assert f"no task has id {10**30}" in api_checks.refused(huge, 422, "invalid", "task")["detail"]
    flag = client.post("/api/dead-letters/replay", json={"filter": {"task": True}}, headers=bearer(operator))
    assert api_checks.refused(flag, 422, "invalid", "task")["detail"] == "task is text or a task id"


def test_a_fix_is_filed_for_approval_and_changes_nothing_yet(client, operator, dead, runs):
    letter = dead()
    headers = bearer(operator)
    filed = client.post(f"/api/dead-letters/{letter.id}/fix",
                        json={"params": {"fail_times": 0}, "reason": "account reopened"}, headers=headers)
    assert filed.status_code == 202, filed.get_json()
    approval = db.session.get(Approval, filed.get_json()["approval_id"])
    assert (approval.status, approval.requested_by_id, approval.after) == ("pending", operator.id,
                                                                           {"params": {"fail_times": 0}})
    assert runs.get(letter.run_id).status == "dead"
    no_reason = client.post(f"/api/dead-letters/{letter.id}/fix", json={"params": {"a": 1}}, headers=headers)
    assert no_reason.status_code == 422 and no_reason.get_json()["field"] == "reason"
    not_object = client.post(f"/api/dead-letters/{letter.id}/fix", json={"params": [1], "reason": "x"},
                             headers=headers)
    assert not_object.status_code == 422 and not_object.get_json()["field"] == "params"


def test_a_fix_with_merge_changes_only_the_keys_sent_and_the_approver_reads_the_whole_result(client, operator,
                                                                                               dead):
    letter = dead()
    headers = bearer(operator)
    before = dict(letter.run.params)
    bad = client.post(f"/api/dead-letters/{letter.id}/fix", json={"params": {"fail_times": 0}, "reason": "x",
                                                                  "merge": "yes"}, headers=headers)
    api_checks.refused(bad, 422, "invalid", "merge")
    filed = client.post(f"/api/dead-letters/{letter.id}/fix", json={"params": {"fail_times": 0}, "merge": True,
                                                                    "reason": "account reopened"}, headers=headers)
    assert filed.status_code == 202, filed.get_json()
    approval = db.session.get(Approval, filed.get_json()["approval_id"])
    assert approval.after == {"params": {**before, "fail_times": 0}} and approval.before == {"params": before}
    assert filed.headers["Location"] == f"/api/approvals/{approval.id}"


def test_a_viewer_reads_but_cannot_replay_fix_or_discard(client, dead):
    viewer, _ = users.create("vic", "viewer", "correct-horse-battery", Actor("test"))
    letter = dead()
    headers = bearer(viewer)
    assert client.get("/api/dead-letters", headers=headers).status_code == 200
    assert client.post(f"/api/dead-letters/{letter.id}/replay", headers=headers).status_code == 403
    for path, payload in ((f"/api/dead-letters/{letter.id}/discard", {"reason": "x"}),
                          ("/api/dead-letters/discard", {"ids": [letter.id], "reason": "x"})):
        assert client.post(path, json=payload, headers=headers).status_code == 403
    assert client.post(f"/api/dead-letters/{letter.id}/fix", json={"params": {}, "reason": "x"},
                       headers=headers).status_code == 403


def test_one_letter_is_discarded_with_a_reason_audited_and_only_once(client, operator, dead):
    """The console discarded letters; the API could only replay them (a client had to leave them open)."""
    letter = dead()
    headers = bearer(operator)
    refused = client.post(f"/api/dead-letters/{letter.id}/discard", json={"reason": "  "}, headers=headers)
    assert refused.status_code == 422 and refused.get_json()["field"] == "reason"
    assert refused.get_json()["detail"] == "say why this dead letter is discarded: a reason is required"
    assert client.post(f"/api/dead-letters/{letter.id}/discard", json={"reason": "x", "why": "y"},
                       headers=headers).status_code == 422
    request = params_fix.request_fix(letter.id, {"fail_times": 0}, "the account was reopened",
                                     Actor(operator.username, operator.id))
    done = client.post(f"/api/dead-letters/{letter.id}/discard", json={"reason": "account closed for good"},
                       headers=headers)
    assert done.status_code == 200
    assert done.get_json() == {"dead_letter_id": letter.id, "status": "discarded", "closed_fixes": [request.id]}
    db.session.expire_all()
    kept = db.session.get(DeadLetter, letter.id)
    assert (kept.status, kept.resolution_note) == ("discarded", "account closed for good")
    assert kept.resolved_by.startswith("olga (token rb_")
    [row] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "dead_letter.discard",
                                                        AuditEntry.target_id == str(letter.id))).scalars().all()
    assert (row.actor, row.note) == (kept.resolved_by, "account closed for good")
    again = client.post(f"/api/dead-letters/{letter.id}/discard", json={"reason": "again"}, headers=headers)
    assert again.status_code == 409 and "already discarded" in again.get_json()["detail"]


def test_many_letters_are_discarded_at_once_up_to_the_threshold_and_beyond_it_are_filed_for_approval(
        client, operator, dead):
    acme, _ = make_tenant("acme"), make_tenant("globex")
    own = [dead(tenant="acme") for _ in range(13)]
    other = dead(tenant="globex")
    headers = bearer(operator, tenant=acme)
    for payload, field in (({"ids": [own[0].id]}, "reason"), ({"ids": [], "reason": "x"}, "ids"),
                           ({"ids": ["1"], "reason": "x"}, "ids"), ({"reason": "x"}, "ids")):
        refused = client.post("/api/dead-letters/discard", json=payload, headers=headers)
        assert refused.status_code == 422 and refused.get_json()["field"] == field, payload
    # Another tenant's letter is skipped, as one no longer open: not discarded, not named.
    done = client.post("/api/dead-letters/discard", json={"ids": [own[0].id, own[1].id, other.id],
                                                           "reason": "accounts closed"}, headers=headers)
    assert done.status_code == 200
    assert done.get_json() == {"discarded": 2, "skipped": 1, "closed_fixes": []}
    db.session.expire_all()
    assert db.session.get(DeadLetter, other.id).status == "open"
    filed = client.post("/api/dead-letters/discard", json={"ids": [letter.id for letter in own],
                                                            "reason": "accounts closed"}, headers=headers)
    assert filed.status_code == 202, filed.get_json()
    body = filed.get_json()
    assert (body["status"], body["count"], body["skipped"], body["threshold"]) == ("pending", 11, 2, 10)
    assert filed.headers["Location"] == f"/api/approvals/{body['approval_id']}"
    db.session.expire_all()
    assert db.session.get(Approval, body["approval_id"]).kind == "dlq.discard_bulk"
    assert {db.session.get(DeadLetter, letter.id).status for letter in own[2:]} == {"open"}  # nothing yet



def test_one_letter_past_the_persons_hour_is_filed_for_approval(client, operator, dead):
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 1, Actor("root"))
    first, second = dead(), dead()
    headers = bearer(operator)
    assert client.post(f"/api/dead-letters/{first.id}/discard", json={"reason": "junk"},
                       headers=headers).status_code == 200
    filed = client.post(f"/api/dead-letters/{second.id}/discard", json={"reason": "junk"}, headers=headers)
    assert filed.status_code == 202, filed.get_json()
    body = filed.get_json()
    assert (body["count"], body["discarded_lately"], body["threshold"]) == (1, 1, 1)
    assert filed.headers["Location"] == f"/api/approvals/{body['approval_id']}"
    again = client.post(f"/api/dead-letters/{second.id}/discard", json={"reason": "junk"}, headers=headers)
    assert again.status_code == 409 and f"request #{body['approval_id']}" in again.get_json()["detail"]
