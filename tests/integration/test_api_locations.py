"""What a client follows without building URLs: the Location of what a request created or started, and the
scheme a 401 asks for."""

from console.services.engine.execute import execute
from tests.factories import BROKEN, LENIENT, Runs, bearer


def test_what_a_request_creates_or_starts_says_where_to_read_it(client, auth, clock):
    headers = bearer(auth.make_user("olga", "operator"))
    submitted = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "k-1"}, headers=headers)
    again = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "k-1"}, headers=headers)
    assert submitted.status_code == 202 and again.status_code == 200
    assert submitted.headers["Location"] == again.headers["Location"] == f"/worker/tasks/{submitted.json['id']}"
    assert client.get(submitted.headers["Location"], headers=headers).json["id"] == submitted.json["id"]
    task = client.post("/internal/tasks/register", json={"name": "nightly", "handler": "demo.noop"}, headers=headers)
    assert task.status_code == 201 and task.headers["Location"] == f"/internal/tasks/{task.json['id']}"
    fired = client.post(f"/internal/tasks/{task.json['id']}/trigger", headers=headers)
    assert fired.status_code == 202 and fired.headers["Location"] == f"/worker/tasks/{fired.json['run_id']}"
    run_id = Runs().submit("demo.flaky", BROKEN, policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    replay = client.post("/api/dead-letters/replay", json={"filter": {"code": "bad_account"}}, headers=headers)
    assert replay.status_code == 202
    assert client.get(replay.headers["Location"], headers=headers).json["operation_id"] == replay.json[
        "operation_id"]
    # A failure an executor reports makes a run Rebound retries: where to follow it (there was none; helper 104).
    reported = client.post("/events", json={"type": "task.execution.failed", "idempotency_key": "ext-9",
                                            "error_code": "http_502", "handler": "demo.noop"}, headers=headers)
    assert reported.status_code == 202 and reported.headers["Location"] == f"/worker/tasks/{reported.json['id']}"


def test_a_401_names_the_bearer_scheme_and_says_when_the_token_sent_was_refused(client):
    missing = client.get("/api/me")
    assert (missing.status_code, missing.headers["WWW-Authenticate"]) == (401, 'Bearer realm="rebound"')
    bare = client.get("/api/me", headers={"Authorization": "Bearer"})
    assert bare.headers["WWW-Authenticate"] == 'Bearer realm="rebound"'
    wrong = client.get("/api/me", headers={"Authorization": "Bearer rb_not-a-token"})
    assert wrong.headers["WWW-Authenticate"] == 'Bearer realm="rebound", error="invalid_token"'
