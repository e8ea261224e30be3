"""A database that does not answer (restarting, unreachable, out of disk) is a 503 to try again, never a 500."""

from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from console.api import worker as worker_api
from console.extensions import PinnableSession, db
from tests.factories import bearer

GONE = OperationalError("SELECT 1", {}, Exception("the database system is shutting down"))


def _refuse(*args, **kwargs):
    raise GONE


def test_an_api_call_while_the_database_restarts_is_a_503_saying_to_send_it_again(client, auth, monkeypatch):
    token = bearer(auth.make_user("svc", "operator"))
    monkeypatch.setattr(worker_api, "submit", _refuse)
    response = client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "k-1"}, headers=token)
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    assert response.json["error"] == "database_unavailable"
    assert "send it again in a few seconds" in response.json["detail"]


def test_a_page_while_the_database_is_gone_says_so_and_tries_again(client, auth, monkeypatch):
    auth.as_role("viewer")
    monkeypatch.setattr(PinnableSession, "get", _refuse)  # even the person behind the session cannot be read
    response = client.get("/runs/")
    page = response.get_data(as_text=True)
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    assert "The database is not answering" in page and '<meta http-equiv="refresh" content="10">' in page


def test_a_token_s_calls_go_on_when_its_last_use_cannot_be_noted(client, auth, monkeypatch):
    """A full disk: the once-a-minute note of a token's use failed, and every call of the token, reads too, was a
    503 for as long as writes failed."""
    token = bearer(auth.make_user("svc", "operator"))
    real_commit, refused = PinnableSession.commit, []

    def commit(session):
        if not refused:
            refused.append(1)
            raise OperationalError("UPDATE api_tokens", {}, Exception("database or disk is full"))
        return real_commit(session)

    monkeypatch.setattr(PinnableSession, "commit", commit)
    response = client.get("/api/me", headers=token)
    assert refused and response.status_code == 200 and response.json["username"] == "svc"


def test_a_token_s_calls_go_on_when_the_note_of_its_use_fails_in_the_database(client, auth):
    """A write lock held for 90 s: the UPDATE itself failed, the session then needed its rollback, and reading the
    token's prefix for the warning first made every call of a token unused for a minute a 500 (helper 162)."""
    token = bearer(auth.make_user("svc", "operator"))
    dbapi, refused = db.engine.dialect.dbapi, []

    def locked(conn, cursor, statement, *args):
        if statement.startswith("UPDATE api_tokens") and not refused:
            refused.append(statement)
            raise dbapi.OperationalError("database is locked")

    event.listen(db.engine, "before_cursor_execute", locked)
    try:
        response = client.get("/api/me", headers=token)
    finally:
        event.remove(db.engine, "before_cursor_execute", locked)
    assert refused and response.status_code == 200 and response.json["username"] == "svc"
