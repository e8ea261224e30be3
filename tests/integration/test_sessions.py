"""Sessions end on the server: a logout ends that session (and every copy of its cookie); a password or role change
and disabling end every session of the person."""

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import EndedSession
from console.services.actor import Actor
from console.services.people import users
from tests.helpers import Auth


def stolen_copy(app, client):
    """Return a second browser holding a copy of the first one's session cookie."""
    thief = app.test_client()
    thief.set_cookie("session", client.get_cookie("session").value)
    return thief


def logged_in(client) -> bool:
    return client.get("/overview").status_code == 200


def test_a_cookie_copied_before_logout_no_longer_works_after_it(app, client, auth):
    auth.as_role("operator", "olga")
    thief = stolen_copy(app, client)
    assert logged_in(thief)
    client.post("/logout", data={"csrf_token": auth.csrf()})
    assert not logged_in(thief)
    assert not logged_in(client)


@pytest.mark.parametrize("change", [
    lambda user: users.update(user, Actor("root"), role="viewer"),
    lambda user: users.update(user, Actor("root"), active=False),
    lambda user: users.set_password(user, "another-long-passphrase", Actor("root")),
])
def test_a_role_change_a_new_password_or_disabling_ends_the_users_sessions(app, client, auth, change):
    user = auth.as_role("operator", "olga")
    assert logged_in(client)
    change(users.get(user.id))
    assert not logged_in(client)


def test_other_people_stay_logged_in(app, client, auth):
    auth.as_role("operator", "olga")
    other = app.test_client()
    Auth(other).as_role("viewer", "vic")
    users.update(users.find("olga"), Actor("root"), role="viewer")
    assert logged_in(other)


def test_a_session_from_before_generations_is_asked_to_log_in_again(app, client, auth):
    auth.as_role("operator", "olga")
    with client.session_transaction() as session:
        session["_user_id"] = session["_user_id"].split(":")[0]  # the old form: the id alone
    assert not logged_in(client)


def test_logging_out_on_one_device_leaves_the_persons_other_sessions_logged_in(app, client, auth):
    """Logging out on the phone mid-incident does not log the laptop out; its own cookie copies end with it."""
    auth.as_role("operator", "olga")
    laptop = app.test_client()
    assert Auth(laptop).login("olga").status_code == 302
    thief = stolen_copy(app, client)
    client.post("/logout", data={"csrf_token": auth.csrf()})
    assert not logged_in(client) and not logged_in(thief)
    assert logged_in(laptop)
    users.set_password(users.find("olga"), "another-long-passphrase", Actor("root"))
    assert not logged_in(laptop)  # a new password still ends every session


def test_a_session_from_before_session_ids_still_ends_every_session_at_its_logout(app, client, auth):
    auth.as_role("operator", "olga")
    laptop = app.test_client()
    assert Auth(laptop).login("olga").status_code == 302
    token = auth.csrf()
    with client.session_transaction() as session:
        session["_user_id"] = ":".join(session["_user_id"].split(":")[:2])  # id and generation: the old form
    assert logged_in(client)
    client.post("/logout", data={"csrf_token": token})
    assert not logged_in(client) and not logged_in(laptop)  # it names no session of its own to end alone


def test_two_logouts_of_one_session_at_once_end_it_once_without_an_error(app, client, auth):
    """A double click or a second tab: both requests come as the session still open; the second changes nothing."""
    auth.as_role("operator", "olga")
    token = auth.csrf()
    twin = stolen_copy(app, client)  # the same session, sent again before the first logout ends it
    with client.session_transaction() as session:
        own = session["_user_id"].split(":")[2]
    user = users.find("olga")
    user.session_id = own
    users.end_session(user, utcnow(), timedelta(days=31))
    users.end_session(user, utcnow(), timedelta(days=31))
    db.session.commit()
    assert db.session.execute(select(func.count()).select_from(EndedSession)).scalar_one() == 1
    assert twin.post("/logout", data={"csrf_token": token}).status_code in (302, 401)
    assert not logged_in(client) and not logged_in(twin)
