"""Channel secrets at rest: sealed in the database, opened only in memory to send, clear when they cannot be."""

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


def stored(name: str) -> str | None:
    return db.session.execute(text("SELECT secret FROM channel_settings WHERE name = :name"),
                              {"name": name}).scalar_one()


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def cli(app, *args: str):
    result = app.test_cli_runner().invoke(args=["channels", *args])
    db.session.expire_all()
    return result


@pytest.fixture
def admin(app, auth):
    app.config.update(ALERT_WEBHOOK_URL="", ALERT_WEBHOOK_SECRET="", PAGERDUTY_ROUTING_KEY="")
    return auth.as_role("admin", "ada")


def test_a_saved_secret_is_sealed_at_rest_and_still_signs(app, client, auth, admin):
    with Receiver() as hook:
        assert save(client, auth, "webhook", url=hook.url, secret=HOOK_SECRET).status_code == 303
        raw = stored("webhook")
        assert raw.startswith(sealing.PREFIX) and HOOK_SECRET not in raw and "ABCD" not in raw
        database = app.config["SQLALCHEMY_DATABASE_URI"]
        if database.startswith("sqlite:///"):  # nor in any page of the file or its write-ahead log
            files = Path(database.removeprefix("sqlite:///")).parent.glob("*.db*")
            assert not any(HOOK_SECRET.encode() in path.read_bytes() for path in files)
        manual.send_test("webhook", Actor("ada"))
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
        assert result.exit_code == 0 and result.output == "webhook: sealed with the current key\n"
        assert sealing.is_sealed(stored("webhook")) and targets.get("webhook").secret == HOOK_SECRET
        [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "channel.reseal")).scalars()
        assert (entry.target_id, entry.before, entry.after) == ("webhook", {"secret": "plaintext"},
                                                                {"secret": "sealed"})
        assert cli(app, "reseal").output == "webhook: already sealed with the current key\n"
        assert ">not encrypted</span>" not in client.get("/admin/channels").get_data(as_text=True)


def test_a_rotated_key_kept_as_a_fallback_still_opens_and_reseal_moves_to_the_new_key(app, client, auth, admin):
    save(client, auth, "webhook", url="https://hooks.example.com/in", secret=HOOK_SECRET)
    old_key = app.config["SECRET_KEY"]
    app.config.update(SECRET_KEY="the-new-secret-key-" + "x" * 32, SECRET_KEY_FALLBACKS=[old_key])
    assert targets.get("webhook").secret == HOOK_SECRET
    assert cli(app, "reseal").output == "webhook: sealed with the current key\n"
    app.config.update(SECRET_KEY_FALLBACKS=[])
    assert targets.get("webhook").secret == HOOK_SECRET


def test_a_secret_sealed_with_a_lost_key_says_so_and_never_fails_a_page(app, client, auth, admin):
    with Receiver() as hook:
        save(client, auth, "webhook", url=hook.url, secret=HOOK_SECRET)
        # The secret key changed with no fallback (a new data dir, a new REBOUND_SECRET_KEY).
        lost = sealing.PREFIX + sealing._fernet("a-key-nobody-has-any-more").encrypt(b"x").decode()
        db.session.execute(text("UPDATE channel_settings SET secret = :lost WHERE name = 'webhook'"), {"lost": lost})
        db.session.commit()
        app.config.update(ALERT_WEBHOOK_SECRET="an-env-secret-that-must-not-stand-in")

        page = client.get("/admin/channels")
        html = page.get_data(as_text=True)
        assert page.status_code == 200 and ">unreadable</span> re-enter it below" in html
        assert "the saved hmac secret is unreadable (the secret key changed): enter it again, or forget it" in html
        target = targets.get("webhook")
        assert (target.configured, target.secret, target.masked_secret) == (False, "", "unreadable")
        refused = client.post("/admin/channels/webhook/test", data={"csrf_token": auth.csrf("/admin/channels")})
        assert refused.status_code == 303 and hook.requests == []  # never sent unsigned, nor signed with the env's

        result = cli(app, "reseal")
        assert result.exit_code == 1 and "webhook: unreadable with every key in force" in result.output

        save(client, auth, "webhook", secret=HOOK_SECRET)  # entered again
        manual.send_test("webhook", Actor("ada"))
        [sent] = hook.requests
        assert sent.headers["X-Rebound-Signature"] == signature(HOOK_SECRET, sent.body)
