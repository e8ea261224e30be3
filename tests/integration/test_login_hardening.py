"""Logins: a bad throttle setting stops the start, spraying one address is throttled, weak passwords are refused."""

import pytest

from console import config
from console.services.actor import Actor
from console.services.engine import registry
from console.services.errors import InvalidInput
from console.services.people import users
from tests.helpers import make_config


def test_a_throttle_that_does_not_parse_stops_the_start_naming_the_setting():
    with pytest.raises(SystemExit, match="REBOUND_LOGIN_RATE_LIMIT must be a rate"):
        config.from_env({"REBOUND_LOGIN_RATE_LIMIT": "ten a minute"})
    with pytest.raises(SystemExit, match="REBOUND_LOGIN_RATE_LIMIT_PER_ADDRESS"):
        config.from_env({"REBOUND_LOGIN_RATE_LIMIT_PER_ADDRESS": "lots"})
    assert config.from_env({"REBOUND_LOGIN_RATE_LIMIT": "5/minute"})["LOGIN_RATE_LIMIT"] == "5/minute"


def test_failed_logins_from_one_address_are_throttled_across_usernames(app, client, auth):
    app.config["LOGIN_RATE_LIMIT_PER_ADDRESS"] = "3 per minute"
    answers = [auth.login(f"guess-{n}", "wrong-password-x") for n in range(4)]
    assert [answer.status_code for answer in answers] == [401, 401, 401, 429]
    assert 0 < int(answers[-1].headers["Retry-After"]) <= 60
    assert "from this address" in auth.login("guess-9", "wrong-password-x").get_data(as_text=True)


def test_successful_logins_do_not_count(app, client, auth):
    app.config["LOGIN_RATE_LIMIT"] = "2 per minute"
    auth.make_user("olga", "operator")
    for _ in range(4):
        assert auth.login("olga").status_code == 302
        client.post("/logout", data={"csrf_token": auth.csrf()})


@pytest.mark.parametrize("password, says", [
    ("olga.smith", "username"), ("OLGA.SMITH", "username"), ("zzzzzzzzzzzz", "repeated"),
    ("olga.smitholga.smith", "built from the username"), ("olga.smith!1", "built from the username"),
    ("abcabcabcabc", "short piece repeated"), ("xy12xy12xy12", "short piece repeated"),
    ("Password123", "common"), ("qwertyuiop", "common"),
    # The username and keys in order, or one key again and again; or keys in order alone.
    ("olga.smith12345", "built from the username"), ("9876olga.smith", "built from the username"),
    ("olga.smith!!!!!!", "built from the username"), ("olga.smithQWERTY", "built from the username"),
    ("4567890123", "keys or letters in order"), ("ZYXWVUTSRQP", "keys or letters in order"),
    # Pieces repeated with a tail, keyboard walks: zxcvbn's judgement, in its words (helper 127 had them accepted).
    ("abcabcabca", "too easy to guess: Repeats like"), ("ababababa1", "too easy to guess"),
    ("12121212121", "too easy to guess"), ("asdfasdfas", "too easy to guess"),
    ("qazwsxedcr", "too easy to guess: This is similar to a commonly used password"),
    ("zxcvbnmasd", "too easy to guess"),
])
def test_weak_passwords_are_refused(app, password, says):
    with pytest.raises(InvalidInput, match=says):
        users.create("olga.smith", "operator", password, Actor("test"))
    user, _ = users.create("olga.smith", "operator", "a-fine-long-passphrase", Actor("test"))
    with pytest.raises(InvalidInput, match=says):
        users.set_password(user, password, Actor("test"))


def test_a_long_strong_password_is_judged_and_taken(app):
    user, _ = users.create("olga.smith", "operator", "Kq83-zzT1-" * 12, Actor("test"))  # past zxcvbn's 72
    assert users.authenticate("olga.smith", "Kq83-zzT1-" * 12) == user


def test_handlers_that_can_take_a_worker_down_exist_only_in_demo_mode(tmp_path, redis_url, client):
    from console import create_app

    assert {"demo.crash", "demo.sleep"} <= set(registry.names())  # the test app is in demo mode
    create_app(make_config(tmp_path, redis_url, DEMO=False))
    try:
        assert registry.get("demo.crash") is None and registry.get("demo.sleep") is None
        assert "demo.noop" in registry.names() and "demo.crash" not in registry.names()
    finally:
        create_app(make_config(tmp_path, redis_url))  # back to demo mode for the tests after this one
    assert registry.get("demo.crash") is not None


def test_an_unknown_name_costs_a_real_password_check_like_a_known_one(app, monkeypatch):
    checked = []
    real_check = users.check_password_hash
    monkeypatch.setattr(users, "check_password_hash", lambda hashed, password: checked.append(hashed)
                        or real_check(hashed, password))
    users.create("olga", "operator", "a-long-passphrase", Actor("test"))
    assert users.authenticate("nobody-here", "a-long-passphrase") is None
    assert users.authenticate("olga", "wrong-passphrase") is None
    # Both answers cost one check of a hash made the same way: timing tells no name apart.
    assert [hashed.split("$")[0] for hashed in checked] == [users.find("olga").password_hash.split("$")[0]] * 2
