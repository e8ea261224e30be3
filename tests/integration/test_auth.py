"""Logging in, roles, CSRF, tokens: every refusal is a clear 4xx that changes nothing."""

import logging
from datetime import timedelta

import pytest
from sqlalchemy import select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import AuditEntry, User
from console.services.actor import Actor
from console.services.errors import InvalidInput
from console.services.people import tokens, users
from tests.factories import make_tenant
from tests.helpers import PASSWORD, csrf_from


def audit_actions():
    return [e.action for e in db.session.query(AuditEntry).order_by(AuditEntry.seq)]


def test_login_with_the_right_password_lands_on_the_overview_and_is_audited(client, auth):
    auth.make_user("olga", "operator")
    response = auth.login("olga")
    assert response.status_code == 302
    assert response.headers["Location"] == "/overview"
    assert client.get("/overview").status_code == 200
    assert audit_actions()[-1] == "auth.login"


def test_wrong_password_is_401_with_a_message_and_a_log_line(client, auth, caplog):
    auth.make_user("olga", "operator")
    with caplog.at_level(logging.WARNING, logger="rebound.security"):
        response = auth.login("olga", "not-the-password")
    assert response.status_code == 401
    page = response.get_data(as_text=True)
    # An alert the fields point at, so a screen reader says it (a flash at the top of the new page was not read).
    assert '<div class="field-error" role="alert" id="login-error">Wrong username or password.</div>' in page
    assert page.count('aria-describedby="login-error"') == 2 and page.count('aria-invalid="true"') == 2
    assert "login failed user=olga" in caplog.text
    assert client.get("/overview").status_code == 302  # still logged out
    # A name no account has is not kept: it is often a password typed into the name box (helper 99).
    with caplog.at_level(logging.WARNING, logger="rebound.security"):
        auth.login("Typo-Password-XYZ-987", "not-the-password")
    assert "Typo-Password" not in caplog.text and "login failed user=<no such account>" in caplog.text
    assert "auth.login" not in audit_actions()


def test_unknown_user_gets_the_same_answer_as_a_wrong_password(auth):
    assert auth.login("nobody", "whatever-it-is").status_code == 401


def test_disabled_user_cannot_log_in(auth):
    user = auth.make_user("gone", "admin")
    user.active = False
    db.session.commit()
    assert auth.login("gone").status_code == 401


def test_next_parameter_only_redirects_inside_the_console(client, auth):
    auth.make_user("olga", "operator")
    page = client.get("/login?next=https://evil.example/")
    response = client.post("/login?next=https://evil.example/", data={
        "username": "olga", "password": PASSWORD, "csrf_token": csrf_from(page.get_data(as_text=True))})
    assert response.headers["Location"] == "/overview"


def test_login_without_csrf_token_is_rejected(client, auth, caplog):
    auth.make_user("olga", "operator")
    with caplog.at_level(logging.WARNING, logger="rebound.security"):
        response = client.post("/login", data={"username": "olga", "password": PASSWORD})
    assert response.status_code == 400
    assert "CSRF" in response.get_data(as_text=True)
    assert "csrf rejected" in caplog.text


def test_a_csrf_token_from_before_login_is_not_taken_after_it(client, auth):
    """The token the login page gave stayed valid once signed in: one planted before login (a sibling subdomain's
    cookie) forged posts after it (helper 127)."""
    auth.make_user("root", "admin")
    before = csrf_from(client.get("/login").get_data(as_text=True))
    signed_in = client.post("/login", data={"username": "root", "password": PASSWORD, "csrf_token": before})
    assert signed_in.status_code == 302
    forged = client.post("/admin/users", data={"username": "mallory", "role": "admin", "csrf_token": before})
    assert forged.status_code == 400
    assert db.session.query(User).filter_by(username="mallory").first() is None
    assert auth.csrf() != before


def test_a_second_tab_signing_in_after_the_first_lands_where_it_was_going(client, auth):
    """Login starts a new session (a new CSRF token), so a second tab's login page, drawn before, answered "The CSRF
    tokens do not match" (helper 128): the person is signed in by then, and goes where that tab was going."""
    auth.make_user("root", "admin")
    second_tab = csrf_from(client.get("/login?next=/dlq/").get_data(as_text=True))
    assert auth.login("root").status_code == 302  # the first tab
    again = client.post("/login?next=/dlq/", data={"username": "root", "password": PASSWORD,
                                                   "csrf_token": second_tab})
    assert (again.status_code, again.headers["Location"]) == (302, "/dlq/")
    signed_out = client.post("/logout", data={"csrf_token": second_tab})  # elsewhere the stale token is refused
    assert signed_out.status_code == 400


def test_admin_form_without_csrf_token_changes_nothing(client, auth):
    auth.as_role("admin", "root")
    response = client.post("/admin/users", data={"username": "mallory", "role": "admin"})
    assert response.status_code == 400
    assert db.session.query(User).filter_by(username="mallory").first() is None


def test_viewer_posting_to_an_admin_route_gets_403_and_nothing_changes(client, auth, caplog):
    target = auth.make_user("target", "operator")
    auth.as_role("viewer", "vic")
    token = auth.csrf()
    with caplog.at_level(logging.WARNING, logger="rebound.security"):
        response = client.post(f"/admin/users/{target.id}", data={
            "csrf_token": token, f"u{target.id}-role": "admin", f"u{target.id}-active": "1"})
    assert response.status_code == 403
    said = response.get_data(as_text=True)
    assert "your role (viewer) may not administer (people, tokens, tenants, channels)" in said
    assert "forbidden user=vic" in caplog.text
    db.session.refresh(target)
    assert target.role == "operator"
    assert client.get("/admin/users").status_code == 403


def test_login_is_rate_limited_per_address_and_name(app, client, auth):
    app.config["LOGIN_RATE_LIMIT"] = "3 per minute"
    auth.make_user("olga", "operator")
    codes = [auth.login("olga", "wrong-password").status_code for _ in range(4)]
    assert codes == [401, 401, 401, 429]
    assert "Too many login attempts" in auth.login("olga").get_data(as_text=True)
    assert auth.login("someone-else", "x" * 10).status_code == 401  # a different name is not locked out


def test_invalid_bearer_token_is_401_json_and_logged(client, caplog):
    with caplog.at_level(logging.WARNING, logger="rebound.security"):
        response = client.get("/api/me", headers={"Authorization": "Bearer rb_not-a-real-token"})
    assert response.status_code == 401
    assert response.json == {"error": "unauthorized",
                             "detail": "the bearer token is invalid, revoked, or its user is disabled"}
    assert "invalid bearer token" in caplog.text


def test_api_without_a_token_says_how_to_send_one(client):
    response = client.get("/api/me")
    assert response.status_code == 401
    assert "Authorization: Bearer" in response.json["detail"]


def test_api_refuses_the_session_cookie(client, auth):
    # The API is CSRF-exempt, so a logged-in browser must not be able to call it.
    auth.as_role("admin")
    assert client.get("/api/me").status_code == 401


def test_a_token_acts_as_its_user_until_revoked(client, auth):
    user = auth.make_user("svc", "operator")
    row, plaintext = tokens.issue(user, Actor("test"), name="billing")
    headers = {"Authorization": f"Bearer {plaintext}"}
    assert client.get("/api/me", headers=headers).json == {
        "username": "svc", "role": "operator", "token": row.prefix, "tenant": None, "expires_at": None}
    assert row.token_hash != plaintext and plaintext not in row.token_hash
    tokens.revoke(row.id, Actor("test"))
    assert client.get("/api/me", headers=headers).status_code == 401


def test_a_token_issued_for_days_works_until_then_and_then_says_it_expired(app, client, auth):
    user = auth.make_user("svc", "operator")
    row, plaintext = tokens.issue(user, Actor("test"), days=30)
    me = client.get("/api/me", headers={"Authorization": f"Bearer {plaintext}"})
    assert me.status_code == 200 and me.json["expires_at"] == row.expires_at.isoformat()
    old, stale = tokens.issue(user, Actor("test"), days=1, clock=lambda: utcnow() - timedelta(days=1, seconds=1))
    refused = client.get("/api/me", headers={"Authorization": f"Bearer {stale}"})
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["WWW-Authenticate"]
    assert refused.json["detail"] == (f"the bearer token expired at {old.expires_at:%Y-%m-%d %H:%M} UTC; ask an "
                                      "admin for a new one")
    tokens.revoke(old.id, Actor("test"))  # revoked says nothing more than any refused token does
    assert client.get("/api/me", headers={"Authorization": f"Bearer {stale}"}).json["detail"] == (
        "the bearer token is invalid, revoked, or its user is disabled")
    for days in (0, tokens.MAX_DAYS + 1):
        with pytest.raises(InvalidInput, match="a token lasts 1 to 3650 days"):
            tokens.issue(user, Actor("test"), days=days)
    runner = app.test_cli_runner()
    printed = runner.invoke(args=["create-token", "svc", "--days", "90"])
    assert printed.exit_code == 0, printed.output
    issued = tokens.authenticate(printed.output.strip())
    assert timedelta(days=89, hours=23) < issued.expires_at - utcnow() <= timedelta(days=90)
    assert runner.invoke(args=["create-token", "svc", "--days", "0"]).exit_code == 2
    # A name past the column was cut to 80 characters unsaid (the form refuses it; helper 155).
    long_name = runner.invoke(args=["create-token", "svc", "--name", "n" * 500])
    assert long_name.exit_code == 1 and "a token's name is at most 80 characters (this one has 500)" in long_name.output


def test_a_token_is_revoked_from_the_cli_by_the_prefix_people_see_and_audited(app, client, auth):
    user = auth.make_user("svc", "operator")
    row, plaintext = tokens.issue(user, Actor("test"), name="billing")
    headers = {"Authorization": f"Bearer {plaintext}"}
    prefix = client.get("/api/me", headers=headers).json["token"]
    runner = app.test_cli_runner()
    revoked = runner.invoke(args=["revoke-token", prefix])
    assert revoked.exit_code == 0, revoked.output
    assert revoked.output == f"Revoked {prefix}… (svc, billing); it no longer authenticates.\n"
    assert client.get("/api/me", headers=headers).status_code == 401
    [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "token.revoke")).scalars()
    assert (entry.actor, entry.target_id) == ("cli", str(row.id))
    again = runner.invoke(args=["revoke-token", prefix])
    assert again.exit_code == 0 and "was already revoked" in again.output
    unknown = runner.invoke(args=["revoke-token", "rb_nothing"])
    assert unknown.exit_code == 1 and "no token has the prefix 'rb_nothing'" in unknown.output
    # The whole token pasted works, and its secret is never printed back.
    _, other = tokens.issue(user, Actor("test"), name="deploy")
    # A typo after the prefix names no token: it revoked the one it began like (helper 167).
    typo = runner.invoke(args=["revoke-token", other[:10] + "_wrong"])
    assert typo.exit_code == 1 and "no token has the prefix" in typo.output and "_wrong" not in typo.output
    assert client.get("/api/me", headers={"Authorization": f"Bearer {other}"}).status_code == 200
    whole = runner.invoke(args=["revoke-token", other])
    assert whole.exit_code == 0 and other[10:] not in whole.output and f"Revoked {other[:10]}…" in whole.output


def test_passwords_are_stored_with_a_kdf(auth):
    user = auth.make_user("olga", "operator")
    assert user.password_hash.startswith(("scrypt:", "pbkdf2:"))
    assert PASSWORD not in user.password_hash


def test_console_pages_are_not_cached(client, auth):
    auth.as_role("viewer")
    assert client.get("/overview").headers["Cache-Control"] == "no-store"
    assert client.get("/login").headers["Cache-Control"] == "no-store"


def test_every_route_declares_who_may_use_it(app):
    undeclared = []
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        if rule.endpoint != "static" and not hasattr(view, "required_permission"):
            undeclared.append(rule.rule)
    assert undeclared == []


def test_every_state_changing_route_is_post_only(app):
    # GET must never change state; the few public GETs are read-only by construction.
    for rule in app.url_map.iter_rules():
        methods = rule.methods - {"HEAD", "OPTIONS"}
        if "POST" in methods and rule.endpoint != "auth.login":
            assert methods <= {"POST", "PUT", "DELETE", "PATCH"}, rule.rule


def test_htmx_request_without_a_session_is_told_to_go_to_login(client):
    response = client.get("/overview", headers={"HX-Request": "true"})
    assert response.status_code == 401
    assert response.headers["HX-Redirect"] == "/login"


def test_create_user_from_the_cli_says_the_tenant_it_is_limited_to(app):
    make_tenant("acme")
    runner = app.test_cli_runner()
    limited = runner.invoke(args=["create-user", "olga", "--role", "operator", "--password", "a-long-pass-42",
                                  "--tenant", "acme"])
    assert limited.exit_code == 0 and limited.output == "Created olga (operator, tenant acme only).\n"
    every = runner.invoke(args=["create-user", "ada", "--role", "admin", "--password", "a-long-pass-42"])
    assert every.output == "Created ada (admin).\n"


def test_set_password_gives_a_new_password_from_the_cli_and_ends_the_old_sessions(app, client, auth):
    """A forgotten or leaked password (the only admin's too) is replaced from the CLI, audited, sessions ended."""
    auth.make_user("olga", "operator")
    auth.login("olga")
    assert client.get("/overview").status_code == 200
    runner = app.test_cli_runner()
    short = runner.invoke(args=["set-password", "olga", "--password", "short"])
    assert short.exit_code == 1 and "Error:" in short.output
    prompted = runner.invoke(args=["set-password", "olga"], input="a-new-long-pass-42\na-new-long-pass-42\n")
    assert prompted.exit_code == 0 and "Set a new password for olga; their sessions are ended." in prompted.output
    assert client.get("/overview").status_code in (302, 401)  # the old session is over
    assert users.authenticate("olga", "a-new-long-pass-42") is not None
    assert users.authenticate("olga", PASSWORD) is None
    entry = db.session.execute(select(AuditEntry).where(AuditEntry.action == "user.password")).scalar_one()
    assert entry.actor == "cli" and "a-new-long-pass-42" not in str(entry.after)
    unknown = runner.invoke(args=["set-password", "nobody", "--password", "a-new-long-pass-42"])
    assert unknown.exit_code == 1 and "no user named 'nobody'" in unknown.output


def test_create_user_asks_for_the_password_off_the_command_line_when_told(app):
    """`--ask-password` keeps a chosen password out of argv (ps, shell history); given with --password it is refused."""
    runner = app.test_cli_runner()
    asked = runner.invoke(args=["create-user", "olga", "--role", "operator", "--ask-password"],
                          input="a-long-pass-42\na-long-pass-42\n")
    assert asked.exit_code == 0 and "Created olga (operator)." in asked.output
    assert "a-long-pass-42" not in asked.output and "Password:" not in asked.output.split("Created")[1]
    assert users.authenticate("olga", "a-long-pass-42") is not None
    both = runner.invoke(args=["create-user", "ada", "--role", "admin", "--password", "a-long-pass-42",
                               "--ask-password"])
    assert both.exit_code == 2 and "not both" in both.output and users.find("ada") is None
