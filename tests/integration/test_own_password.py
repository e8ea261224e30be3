"""A person changes their own password; an admin resets another's, shown once, to be changed at the next login."""

import re

from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry
from console.services.actor import Actor
from console.services.people import tokens, users
from tests.factories import make_tenant
from tests.helpers import PASSWORD, Auth

NEW = "a-fresh-river-of-lanterns"


def change(client, auth, current=PASSWORD, password=NEW, repeat=None):
    return client.post("/account/password", data={"current": current, "password": password,
                                                   "repeat": password if repeat is None else repeat,
                                                   "csrf_token": auth.csrf("/account/")})


def password_rows():
    return db.session.execute(select(AuditEntry).where(AuditEntry.action == "user.password")
                              .order_by(AuditEntry.seq)).scalars().all()


def test_a_person_changes_their_own_password_and_their_other_sessions_end(app, client, auth):
    auth.as_role("viewer", "vic")
    laptop = app.test_client()
    assert Auth(laptop).login("vic").status_code == 302
    answer = change(client, auth)
    assert (answer.status_code, answer.headers["Location"]) == (302, "/account/")
    page = client.get("/account/").text
    assert "Your password is changed; your other sessions have ended." in page
    assert "Your role may read the console&#39;s pages." in page  # not the refusal's "view this"
    assert client.get("/overview").status_code == 200  # this session goes on
    assert laptop.get("/overview").status_code == 302  # the other one ended
    assert Auth(app.test_client()).login("vic", PASSWORD).status_code == 401
    assert Auth(app.test_client()).login("vic", NEW).status_code == 302
    [row] = password_rows()
    assert (row.actor, row.note) == ("vic", "changed by its person")


def test_a_wrong_current_password_a_weak_or_mistyped_new_one_change_nothing(app, client, auth):
    auth.as_role("operator", "olga")
    wrong = change(client, auth, current="not-my-password-at-all")
    assert wrong.status_code == 401 and "that is not your current password" in wrong.text
    mistyped = change(client, auth, repeat=NEW + "x")
    assert mistyped.status_code == 422 and "the two new passwords differ" in mistyped.text
    weak = change(client, auth, password="olga123456")
    assert weak.status_code == 422 and "must not be built from the username" in weak.text
    same = change(client, auth, password=PASSWORD)
    assert same.status_code == 422 and "must differ from the current one" in same.text
    assert NEW not in wrong.text + mistyped.text  # a password typed is never sent back
    assert password_rows() == []
    assert Auth(app.test_client()).login("olga", PASSWORD).status_code == 302


def test_wrong_current_passwords_are_throttled_as_logins_are(app, client, auth):
    app.config["LOGIN_RATE_LIMIT"] = "2 per minute"
    auth.as_role("viewer", "vic")
    assert [change(client, auth, current="guess-number-one-x").status_code for _ in range(2)] == [401, 401]
    refused = change(client, auth)  # the right one now waits too: guesses from a session left open are capped
    assert refused.status_code == 429 and "Too many wrong current passwords" in refused.text
    assert password_rows() == []


def test_an_admin_resets_a_password_shown_once_and_its_person_must_choose_their_own_first(app, client, auth):
    auth.as_role("admin", "root")
    olga = auth.make_user("olga", "operator")
    token = tokens.issue(olga, Actor("test"))[1]
    theirs = app.test_client()
    assert Auth(theirs).login("olga").status_code == 302
    answer = client.post(f"/admin/users/{olga.id}/password", data={"csrf_token": auth.csrf("/admin/users")})
    assert answer.status_code == 200
    assert "Reset olga&#39;s password; their sessions have ended" in answer.text
    temporary = re.search(r'<p class="secret" id="new-password">(\S+)</p>', answer.text).group(1)
    assert temporary not in client.get("/admin/users").text
    assert "password reset; to be changed at their next login" in client.get("/admin/users").text
    assert theirs.get("/overview").status_code == 302  # ended
    [row] = password_rows()
    assert (row.actor, row.target_id, row.note) == ("root", str(olga.id),
                                                   "reset by an admin; to be changed at the next login")

    person = Auth(theirs)
    assert person.login("olga", temporary).status_code == 302
    for path in ("/overview", "/dlq/", "/runs/?status=failed"):
        moved = theirs.get(path)
        assert (moved.status_code, moved.headers["Location"]) == (302, "/account/"), path
    fragment = theirs.get("/dlq/", headers={"HX-Request": "true"})
    assert (fragment.status_code, fragment.headers["HX-Redirect"]) == (204, "/account/")
    walled = theirs.get("/account/").text
    assert "An admin reset your password" in walled
    assert 'href="/dlq/"' not in walled and 'href="/runs/"' not in walled  # no nav links that lead back here
    # A service's token acts on: it was never the password's to end.
    assert theirs.get("/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    assert change(theirs, person, current=temporary).status_code == 302
    assert theirs.get("/overview").status_code == 200
    assert not users.find("olga").must_change_password
    assert "An admin reset your password" not in theirs.get("/account/").text


def test_an_admin_resets_no_password_of_their_own_nor_of_another_tenants_person(app, client, auth):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    admin = auth.make_user("tad", "admin", tenant=acme)
    gina = auth.make_user("gina", "operator", tenant=globex)
    auth.login("tad")
    own = client.post(f"/admin/users/{admin.id}/password", data={"csrf_token": auth.csrf("/admin/users")},
                      follow_redirects=True)
    assert "this is your own account: change your password under Your account" in own.text
    other = client.post(f"/admin/users/{gina.id}/password", data={"csrf_token": auth.csrf("/admin/users")})
    assert other.status_code == 404
    assert password_rows() == []


def test_only_an_admin_may_reset_a_password(app, client, auth):
    auth.as_role("approver", "april")
    olga = auth.make_user("olga", "operator")
    refused = client.post(f"/admin/users/{olga.id}/password", data={"csrf_token": auth.csrf()})
    assert refused.status_code == 403
    assert password_rows() == []


def test_an_answer_sent_again_does_not_reset_the_password_a_second_time(app, client, auth):
    """A reload of the page showing the password sent the form again: a second reset, and the password the admin
    had given out stopped working (helper 164)."""
    auth.as_role("admin", "root")
    olga = auth.make_user("olga", "operator")
    page = client.get("/admin/users").text
    key = re.search(rf'/admin/users/{olga.id}/password">.*?name="reset_key" value="([0-9a-f]{{32}})"', page,
                    re.S).group(1)
    form = {"csrf_token": auth.csrf("/admin/users"), "reset_key": key}
    first = client.post(f"/admin/users/{olga.id}/password", data=form)
    given = re.search(r'<p class="secret" id="new-password">(\S+)</p>', first.text).group(1)
    again = client.post(f"/admin/users/{olga.id}/password", data=form, follow_redirects=True)
    assert "That reset of olga&#39;s password was done already" in again.text and given not in again.text
    assert len(password_rows()) == 1
    assert Auth(app.test_client()).login("olga", given).status_code == 302  # what was given out still works
