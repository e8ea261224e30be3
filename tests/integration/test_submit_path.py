"""POST /worker/tasks reads what it needs once per request, and a token's revocation or its user's change still
stops the very next call."""

import pytest
from sqlalchemy import event

from console.auth import API_PREFIXES
from console.extensions import db
from console.services.actor import Actor
from console.services.people import tokens, users
from tests.factories import make_tenant

SUBMIT = "/worker/tasks"
BODY = {"handler": "demo.noop"}


@pytest.fixture
def statements(app):
    """The first words of each SQL statement run while the test holds the list."""
    seen = []

    def record(connection, cursor, statement, *args):
        seen.append(" ".join(statement.split()[:2]))

    event.listen(db.engine, "before_cursor_execute", record)
    yield seen
    event.remove(db.engine, "before_cursor_execute", record)


def token_for(auth, role="operator", tenant=None):
    user = auth.make_user("svc", role)
    row, plaintext = tokens.issue(user, Actor("test"), tenant=tenant)
    return user, row, {"Authorization": f"Bearer {plaintext}"}


def submitted(client, headers, statements) -> list[str]:
    """Submit once to settle the token's last_used_at, then again; return the second submit's statements."""
    assert client.post(SUBMIT, json=BODY, headers=headers).status_code == 202
    statements.clear()
    response = client.post(SUBMIT, json=BODY, headers=headers)
    assert response.status_code == 202, response.json
    return list(statements)


def the_run_and_its_timeline_row() -> list[str]:
    """One statement on PostgreSQL (an INSERT in a CTE), two on SQLite."""
    return ['WITH "new"'] if db.engine.dialect.name == "postgresql" else ["INSERT INTO", "INSERT INTO"]


def test_a_submit_reads_the_token_with_its_user_once(client, auth, statements):
    _, _, headers = token_for(auth)
    # The token with its user (and tenant, none here), the named tenant, the counts with the policy in force, the
    # run and its timeline row. The user was read a second time when the session had already dropped it.
    assert submitted(client, headers, statements) == [
        "SELECT api_tokens.id,", "SELECT tenants.id,", "SELECT (SELECT", *the_run_and_its_timeline_row()]


def test_a_tenant_limited_token_brings_its_tenant_with_it(client, auth, statements):
    tenant = make_tenant("acme")
    _, _, headers = token_for(auth, tenant=tenant)
    assert submitted(client, headers, statements) == [
        "SELECT api_tokens.id,", "SELECT (SELECT", *the_run_and_its_timeline_row()]
    run = client.post(SUBMIT, json=BODY, headers=headers).json
    assert client.get(f"{SUBMIT}/{run['id']}", headers=headers).json["tenant"] == "acme"


def test_a_revoked_token_is_refused_on_its_next_call(client, auth):
    _, row, headers = token_for(auth)
    assert client.post(SUBMIT, json=BODY, headers=headers).status_code == 202
    tokens.revoke(row.id, Actor("test"))
    response = client.post(SUBMIT, json=BODY, headers=headers)
    assert response.status_code == 401 and "revoked" in response.json["detail"]


def test_a_disabled_user_or_a_lower_role_takes_effect_on_the_next_call(client, auth):
    user, _, headers = token_for(auth)
    assert client.post(SUBMIT, json=BODY, headers=headers).status_code == 202
    users.update(user, Actor("test"), role="viewer")
    response = client.post(SUBMIT, json=BODY, headers=headers)
    assert response.status_code == 403 and "viewer" in response.json["detail"]
    users.update(user, Actor("test"), role="operator", active=False)
    assert client.post(SUBMIT, json=BODY, headers=headers).status_code == 401


def test_an_api_call_neither_reads_nor_writes_the_session_cookie(client, auth):
    _, _, headers = token_for(auth)
    auth.as_role("admin")  # the client now carries another person's console session cookie as well
    response = client.post(SUBMIT, json=BODY, headers=headers)
    # The token decides; the cookie's person used to be loaded instead, and the call refused as cookie-only.
    assert response.status_code == 202
    assert client.get(f"{SUBMIT}/{response.json['id']}", headers=headers).json["status"] in ("pending", "running")
    # The session was not opened (reading it is what adds Vary: Cookie) and nothing is set back.
    assert "Cookie" not in response.headers.get("Vary", "") and "Set-Cookie" not in response.headers
    assert client.get("/overview").status_code == 200  # the console session itself is untouched


def test_rate_limits_are_on_console_routes_only(app):
    # The API skips Flask-Limiter (console/page_hooks.py), which would skip a limit put on an API view too.
    limited = {rule.rule for rule in app.url_map.iter_rules()
               if getattr(app.view_functions[rule.endpoint], "__wrapper-limiter-instance", None) is not None}
    # The marker Flask-Limiter puts on a limited view still means what it did.
    assert limited == {"/login", "/account/password"}
    assert not any(path.startswith(API_PREFIXES) for path in limited)


def test_an_api_call_takes_its_user_from_the_token_alone(client, auth):
    _, _, headers = token_for(auth)
    other = auth.make_user("olga", "admin")
    # A remember-me cookie naming another person rides along: Flask-Login would have loaded that person first.
    client.set_cookie("remember_token", f"{other.id}:1|forged")
    response = client.get("/api/me", headers=headers)
    assert response.status_code == 200 and response.json["username"] == "svc"
    assert client.get("/api/me", headers={"Authorization": "Bearer rb_unknown"}).status_code == 401


def test_a_console_page_still_takes_a_bearer_token(client, auth):
    _, _, headers = token_for(auth)
    assert client.get("/overview", headers=headers).status_code == 200
    assert client.get("/overview").status_code == 302  # and without one, the login page


def test_a_console_page_takes_a_bearer_token_again_from_a_client_that_keeps_cookies(client, auth):
    # curl -c jar -b jar: the first page's cookie (a CSRF token, no user) rode along on the next call, and Flask-Login
    # took it for a session stolen from another browser: the token was refused with a 401.
    _, _, headers = token_for(auth, role="admin")
    with client.session_transaction() as session:
        session["csrf_token"] = "from-an-earlier-page"
    for path in ("/overview", "/admin/users", "/overview"):
        assert client.get(path, headers=headers).status_code == 200
    assert "Set-Cookie" not in client.get("/overview", headers=headers).headers  # nothing to keep: the token says who
