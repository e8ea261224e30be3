"""Channel secrets and URLs at rest: sealed in the database, opened only in memory to send, clear when they cannot
be."""

import hashlib
import hmac
from pathlib import Path

import pytest
from sqlalchemy import select, text

from console.extensions import db
from console.models import AuditEntry, ChannelSetting
from console.services import sealing
from console.services.actor import Actor
from console.services.delivery import manual, targets
from tests.receiver import Receiver

HOOK_SECRET = "hmac-secret-0123456789-ABCD"
ROUTING_KEY = "R0UTINGKEYabcdef0123456789wxyz"


def save(client, auth, name: str, **fields):
    token = auth.csrf("/admin/channels")
    data = {"csrf_token": token, f"{name}-enabled": "1", **{f"{name}-{key}": value for key, value in fields.items()}}
    return client.post(f"/admin/channels/{name}", data=data)


def stored(name: str, column: str = "secret") -> str | None:
    return db.session.execute(text(f"SELECT {column} FROM channel_settings WHERE name = :name"),
                              {"name": name}).scalar_one()


def on_disk(app, value: str) -> bool:
    """Tell whether a value is in any page of the SQLite file or its write-ahead log (False on PostgreSQL)."""
    database = app.config["SQLALCHEMY_DATABASE_URI"]
    if not database.startswith("sqlite:///"):
        return False
    files = Path(database.removeprefix("sqlite:///")).parent.glob("*.db*")
    return any(value.encode() in path.read_bytes() for path in files)


def seal_with_a_lost_key(name: str, column: str) -> None:
    """Store a value sealed with a key no longer in force (a new data dir, a new REBOUND_SECRET_KEY, no fallback)."""
    lost = sealing.PREFIX + sealing._fernet("a-key-nobody-has-any-more").encrypt(b"x").decode()
    db.session.execute(text(f"UPDATE channel_settings SET {column} = :lost WHERE name = :name"),
                       {"lost": lost, "name": name})
    db.session.commit()


def channels_page(client) -> str:
    page = client.get("/admin/channels")
    assert page.status_code == 200
    return page.get_data(as_text=True)


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def cli(app, *args: str):
    result = app.test_cli_runner().invoke(args=["channels", *args])
    db.session.expire_all()
    return result


@pytest.fixture
def admin(app, auth):
    app.config.update(ALERT_WEBHOOK_URL="", ALERT_WEBHOOK_SECRET="", PAGERDUTY_ROUTING_KEY="", WORKORDER_URL="",
                      WORKORDER_SECRET="")
    return auth.as_role("admin", "ada")


@pytest.mark.parametrize("channel", ["webhook", "workorder"])
def test_a_saved_secret_is_sealed_at_rest_and_still_signs(app, client, auth, admin, channel):
    with Receiver() as hook:
        assert save(client, auth, channel, url=hook.url, secret=HOOK_SECRET).status_code == 303
        raw = stored(channel)
        assert raw.startswith(sealing.PREFIX) and HOOK_SECRET not in raw and "ABCD" not in raw
        assert not on_disk(app, HOOK_SECRET)
        manual.send_test(channel, Actor("ada"))
        [sent] = hook.requests
        assert sent.headers["X-Rebound-Signature"] == signature(HOOK_SECRET, sent.body)


def test_a_saved_routing_key_reaches_pagerduty(app, client, auth, admin):
    with Receiver() as pagerduty:
        save(client, auth, "pagerduty", url=pagerduty.url + "/v2/enqueue", secret=ROUTING_KEY)
        assert ROUTING_KEY not in stored("pagerduty")
        manual.send_test("pagerduty", Actor("ada"))
        [sent] = pagerduty.requests
        assert sent.json["routing_key"] == ROUTING_KEY


def test_a_secret_saved_before_sealing_still_sends_and_the_cli_seals_it(app, client, auth, admin):
    with Receiver() as hook:
        db.session.add(ChannelSetting(name="webhook", url=hook.url, secret=HOOK_SECRET, enabled=True))
        db.session.commit()
        html = client.get("/admin/channels").get_data(as_text=True)
        assert ">not encrypted</span>" in html and HOOK_SECRET not in html
        manual.send_test("webhook", Actor("ada"))
        assert hook.requests[0].headers["X-Rebound-Signature"] == signature(HOOK_SECRET, hook.requests[0].body)

        result = cli(app, "reseal")
        assert result.exit_code == 0 and result.output == ("webhook URL: sealed with the current key\n"
                                                           "webhook HMAC secret: sealed with the current key\n")
        assert sealing.is_sealed(stored("webhook")) and targets.get("webhook").secret == HOOK_SECRET
        assert sealing.is_sealed(stored("webhook", "url")) and targets.get("webhook").url == hook.url
        entries = db.session.execute(select(AuditEntry).where(AuditEntry.action == "channel.reseal")
                                     .order_by(AuditEntry.seq)).scalars()
        assert [(e.target_id, e.before, e.after) for e in entries] == [
            ("webhook", {"url": "plaintext"}, {"url": "sealed"}), ("webhook", {"secret": "plaintext"},
                                                                   {"secret": "sealed"})]
        assert cli(app, "reseal").output == ("webhook URL: already sealed with the current key\n"
                                             "webhook HMAC secret: already sealed with the current key\n")
        assert ">not encrypted</span>" not in client.get("/admin/channels").get_data(as_text=True)


def test_a_rotated_key_kept_as_a_fallback_still_opens_and_reseal_moves_to_the_new_key(app, client, auth, admin):
    save(client, auth, "webhook", url="https://hooks.example.com/in", secret=HOOK_SECRET)
    old_key = app.config["SECRET_KEY"]
    app.config.update(SECRET_KEY="the-new-secret-key-" + "x" * 32, SECRET_KEY_FALLBACKS=[old_key])
    assert targets.get("webhook").secret == HOOK_SECRET
    assert cli(app, "reseal").output == ("webhook URL: sealed with the current key\n"
                                         "webhook HMAC secret: sealed with the current key\n")
    app.config.update(SECRET_KEY_FALLBACKS=[])
    assert targets.get("webhook").secret == HOOK_SECRET


def test_a_secret_sealed_with_a_lost_key_says_so_and_never_fails_a_page(app, client, auth, admin):
    with Receiver() as hook:
        save(client, auth, "webhook", url=hook.url, secret=HOOK_SECRET)
        seal_with_a_lost_key("webhook", "secret")
        app.config.update(ALERT_WEBHOOK_SECRET="an-env-secret-that-must-not-stand-in")

        html = channels_page(client)
        assert ">unreadable</span> re-enter it below" in html
        assert "the saved hmac secret is unreadable (the secret key changed): enter it again, or forget it" in html
        target = targets.get("webhook")
        assert (target.configured, target.secret, target.masked_secret) == (False, "", "unreadable")
        refused = client.post("/admin/channels/webhook/test", data={"csrf_token": auth.csrf("/admin/channels")})
        assert refused.status_code == 303 and hook.requests == []  # never sent unsigned, nor signed with the env's

        result = cli(app, "reseal")
        assert result.exit_code == 1 and "webhook HMAC secret: unreadable with every key in force" in result.output

        save(client, auth, "webhook", secret=HOOK_SECRET)  # entered again
        manual.send_test("webhook", Actor("ada"))
        [sent] = hook.requests
        assert sent.headers["X-Rebound-Signature"] == signature(HOOK_SECRET, sent.body)


def test_a_saved_slack_url_is_sealed_at_rest_and_still_sends(app, client, auth, admin):
    with Receiver() as slack:
        url = slack.url + "/services/T0001/B0002/XXXXslackSECRETpath"
        assert save(client, auth, "slack", url=url).status_code == 303
        raw = stored("slack", "url")
        assert raw.startswith(sealing.PREFIX) and "slackSECRET" not in raw
        assert not on_disk(app, "slackSECRET")
        html = client.get("/admin/channels").get_data(as_text=True)
        assert "slackSECRET" not in html and "/…path" in html and ">not encrypted</span>" not in html
        manual.send_test("slack", Actor("ada"))
        assert slack.paths() == ["/services/T0001/B0002/XXXXslackSECRETpath"]


def test_a_url_sealed_with_a_lost_key_says_so_and_the_env_url_does_not_stand_in(app, client, auth, admin):
    with Receiver() as saved, Receiver() as env:
        save(client, auth, "slack", url=saved.url + "/services/saved")
        seal_with_a_lost_key("slack", "url")
        app.config.update(SLACK_WEBHOOK_URL=env.url + "/services/env")

        html = channels_page(client)
        assert ">unreadable</span> re-enter the URL below" in html
        assert "the saved URL is unreadable (the secret key changed): enter it again, or forget it" in html
        target = targets.get("slack")
        assert (target.configured, target.url, target.url_source) == (False, "", "console")
        client.post("/admin/channels/slack/test", data={"csrf_token": auth.csrf("/admin/channels")})
        assert saved.requests == [] and env.requests == []
        assert "unreadable: slack URL): is it the key the console runs with?" in cli(app, "reseal").output

        save(client, auth, "slack", forget_url="y")  # back to the env's URL, as the page offers
        manual.send_test("slack", Actor("ada"))
        assert env.paths() == ["/services/env"]


def test_reseal_with_a_key_that_opens_nothing_seals_nothing(app, client, auth, admin):
    """A walk ran reseal with a wrong REBOUND_SECRET_KEY: it sealed the plaintext Slack URL with it, and the channel
    went dark until the URL was typed again."""
    save(client, auth, "webhook", url="https://hooks.example.com/in", secret=HOOK_SECRET)
    db.session.add(ChannelSetting(name="slack", url="https://hooks.slack.com/services/T0/B0/plainSECRET",
                                  enabled=True))
    db.session.commit()
    right_key = app.config["SECRET_KEY"]
    app.config.update(SECRET_KEY="a-wrong-secret-key-" + "y" * 32)
    result = cli(app, "reseal")
    assert result.exit_code == 1 and "no saved value opens with the secret key in force" in result.output
    assert stored("slack", "url") == "https://hooks.slack.com/services/T0/B0/plainSECRET"  # left as it was
    app.config.update(SECRET_KEY=right_key)
    assert "slack URL: sealed with the current key" in cli(app, "reseal").output
    assert targets.get("slack").url == "https://hooks.slack.com/services/T0/B0/plainSECRET"
