"""Seed 001's `task.execution.updated`: "执行状态回传，包括进度、结果、错误码" — an executor reports a running attempt's
progress, its result when it succeeded, or its error code when it failed. Only progress and a message were taken: any
result or error code was a 422 "unknown field" (helper 132)."""

import pytest
from sqlalchemy import select, update

from console.extensions import db
from console.models import Run, RunEvent
from console.services.engine import transitions
from tests.api_checks import refused
from tests.factories import bearer

UPDATED = "task.execution.updated"


@pytest.fixture
def operator(auth):
    return bearer(auth.make_user("olga", "operator"))


@pytest.fixture
def running(client, operator):
    """A run an external executor is carrying out: submitted, then running its first attempt."""

    def start(key: str, params: dict | None = None) -> Run:
        answer = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": key,
                                                    "params": params or {}}, headers=operator)
        assert answer.status_code == 202
        db.session.execute(update(Run).where(Run.id == answer.json["id"]).values(
            status="running", attempt=1, executions=1, retry_token=f"token-{key}"))
        db.session.commit()
        return db.session.get(Run, answer.json["id"])

    return start


def report(client, operator, **data):
    return client.post("/events", json={"type": UPDATED, "data": data}, headers=operator)


def fresh(run_id: int) -> Run:
    db.session.expire_all()
    return db.session.get(Run, run_id)


def test_progress_then_success_with_its_result_ends_the_attempt(client, operator, running):
    run = running("export-1", {"api_key": "s3cr3t-value"})
    assert report(client, operator, idempotency_key="export-1", progress=40, message="halfway").status_code == 202
    assert (fresh(run.id).progress, fresh(run.id).progress_message) == (40, "halfway")

    done = report(client, operator, idempotency_key="export-1", status="succeeded", retry_token="token-export-1",
                  result={"rows": 5, "echo": "s3cr3t-value"}, message="exported")
    assert done.status_code == 202 and done.json == {"id": run.id, "status": "succeeded", "duplicate": False}
    ended = fresh(run.id)
    # The result as the run keeps a handler's: its secret params masked by value.
    assert ended.status == "succeeded" and ended.result == {"rows": 5, "echo": "***"} and ended.progress == 100
    assert ended.finished_at is not None and ended.progress_message == "exported"
    kinds = db.session.execute(select(RunEvent.kind).where(RunEvent.run_id == run.id).order_by(RunEvent.id)
                               ).scalars().all()
    assert kinds[-2:] == ["success_reported", "succeeded"]
    # Sent again after a timeout: the same answer, nothing changed.
    again = report(client, operator, idempotency_key="export-1", status="succeeded",
                   result={"rows": 5, "echo": "s3cr3t-value"})
    assert again.status_code == 200 and again.json["duplicate"] is True
    assert db.session.scalar(select(db.func.count()).select_from(RunEvent).where(RunEvent.run_id == run.id)) == len(
        kinds)
    # Still a duplicate once more is noted on the run (its worker's own outcome, dropped as stale; helper 133).
    transitions.event(fresh(run.id), "stale_success", fresh(run.id).finished_at, message="dropped")
    db.session.commit()
    assert report(client, operator, idempotency_key="export-1", status="succeeded").json["duplicate"] is True
    # What a client that sends the same request again reads back is that result.
    resent = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "export-1"},
                         headers=operator)
    assert resent.json["result"] == {"rows": 5, "echo": "***"}


def test_a_failure_with_its_error_code_goes_into_the_retry_flow(client, operator, running):
    run = running("export-2")
    failed = report(client, operator, idempotency_key="export-2", status="failed", error_code="http_503",
                    message="upstream unavailable", retryable=True, retry_after_s=30)
    assert failed.status_code == 202 and failed.json["status"] == "retry_wait" and failed.json["next_retry_at"]
    assert fresh(run.id).error_code == "http_503"
    again = report(client, operator, idempotency_key="export-2", status="failed", error_code="http_503")
    assert again.status_code == 200 and again.json["duplicate"] is True


@pytest.mark.parametrize(("data", "status", "error", "field"), [
    ({"status": "done"}, 422, "invalid", "status"),
    ({"status": "succeeded", "error_code": "boom"}, 422, "invalid", "error_code"),
    ({"error_code": "boom"}, 422, "invalid", "error_code"),  # a failure says so
    ({"status": "failed", "error_code": "boom", "result": {}}, 422, "invalid", "result"),
    ({"status": "failed"}, 422, "invalid", "error_code"),
    ({"result": {"rows": 1}}, 422, "invalid", "result"),  # progress carries no result
    ({"status": "succeeded", "retry_after_s": 5}, 422, "invalid", "retry_after_s"),
    ({"status": "succeeded", "retry_token": "another-attempt"}, 409, "conflict", "retry_token"),
    # An earlier attempt's executor still reporting wrote its progress over the current attempt's (helper 152).
    ({"progress": 90, "retry_token": "another-attempt"}, 409, "conflict", "retry_token"),
    ({"status": "succeeded", "result": 1, "progress": 50}, 422, "invalid", "progress"),
    ({"status": "failed", "error_code": "boom", "progress": 50}, 422, "invalid", "progress"),
])
def test_a_report_that_does_not_fit_together_is_refused_and_changes_nothing(client, operator, running, data, status,
                                                                            error, field):
    run = running("export-3")
    refused(report(client, operator, idempotency_key="export-3", **data), status, error, field)
    assert fresh(run.id).status == "running" and fresh(run.id).result is None


def test_a_success_sent_again_with_another_result_is_refused_and_keeps_the_first(client, operator, running):
    """It was a 200 "duplicate" that dropped the second result unsaid (helper 152)."""
    run = running("export-6")
    report(client, operator, idempotency_key="export-6", status="succeeded", result={"rows": 5})
    refused(report(client, operator, idempotency_key="export-6", status="succeeded", result={"rows": 6}), 409,
            "conflict", "result")
    assert fresh(run.id).result == {"rows": 5}


def test_progress_with_the_current_attempts_token_is_recorded(client, operator, running):
    run = running("export-7")
    answer = report(client, operator, idempotency_key="export-7", progress=30, retry_token="token-export-7")
    assert answer.status_code == 202 and fresh(run.id).progress == 30


def test_a_failure_sent_again_after_a_person_cancelled_its_retry_is_a_duplicate(client, operator, running):
    """The resend of a report that landed met a 409 "only a running run can fail" once someone had cancelled the
    retry it scheduled (helper 152)."""
    run = running("export-8")
    sent = report(client, operator, idempotency_key="export-8", status="failed", error_code="http_503",
                  retryable=True, retry_after_s=300)
    assert sent.json["status"] == "retry_wait"
    assert client.post(f"/worker/tasks/{run.id}/cancel", headers=operator).status_code in (200, 202)
    assert fresh(run.id).status == "cancelled"
    again = report(client, operator, idempotency_key="export-8", status="failed", error_code="http_503")
    assert again.status_code == 200 and (again.json["status"], again.json["duplicate"]) == ("cancelled", True)
    refused(report(client, operator, idempotency_key="export-8", status="failed", error_code="http_500"), 409,
            "conflict", "idempotency_key")


def test_an_end_reported_for_a_run_not_running_or_unknown_is_refused(client, operator, running):
    run = running("export-4")
    db.session.execute(update(Run).where(Run.id == run.id).values(status="pending"))
    db.session.commit()
    refused(report(client, operator, idempotency_key="export-4", status="succeeded", result={}), 409, "conflict",
            "idempotency_key")
    refused(report(client, operator, idempotency_key="nobody", status="succeeded"), 404, "not_found")
    refused(report(client, operator, idempotency_key="nobody", status="failed", error_code="boom"), 404,
            "not_found")


def test_what_an_executor_says_is_masked_as_a_handlers_failure_is(client, operator, running):
    """A viewer read a secret param where an executor repeated it: as a result's key, in its status text (with a
    URL's credentials and an api_key query), and as an error code on the timeline (helper 134)."""
    run = running("export-5", {"api_key": "SUPERSECRET-1", "nested": {"password": "hunter2hunter2"}})
    said = "GET https://u:p4ss@api.example.test/v1?api_key=sk_live_abcdefgh with SUPERSECRET-1"
    assert report(client, operator, idempotency_key="export-5", progress=10, message=said).status_code == 202
    shown = fresh(run.id).progress_message
    assert "SUPERSECRET-1" not in shown and "p4ss" not in shown and "sk_live_abcdefgh" not in shown
    done = report(client, operator, idempotency_key="export-5", status="succeeded", message=f"done: {said}",
                  result={"hunter2hunter2": "as a key", "n": {"hunter2hunter2": {"x": 1}},
                          "hunter2hunter2 again": 1, "*** again": 2})
    assert done.status_code == 202
    ended = fresh(run.id)
    # Keys masked alike both stay (in the result's key order, as it is kept: sorted), the later one numbered.
    assert ended.result == {"***": "as a key", "n": {"***": {"x": 1}}, "*** again": 2, "*** again #2": 1}
    assert "SUPERSECRET-1" not in ended.progress_message and "p4ss" not in ended.progress_message

    failing = running("export-6", {"db_password": "PW-GLOBEX-777x"})
    failed = report(client, operator, idempotency_key="export-6", status="failed", error_code="PW-GLOBEX-777x",
                    message="login failed for PW-GLOBEX-777x", retryable=False)
    assert failed.status_code == 202
    codes = db.session.execute(select(RunEvent.error_code).where(RunEvent.run_id == failing.id,
                                                                 RunEvent.error_code.is_not(None))).scalars().all()
    assert codes and set(codes) == {"***"}
    again = report(client, operator, idempotency_key="export-6", status="failed", error_code="PW-GLOBEX-777x")
    assert again.status_code == 200 and again.json["duplicate"] is True
