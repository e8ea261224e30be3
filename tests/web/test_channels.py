"""Admin → Channels: masked targets, last delivery, the test button, and settings saved in the console."""

import re

from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry, ChannelSetting
from console.services.actor import Actor
from console.services.delivery import manual, targets
from console.services.delivery.dispatch import ROUTES
from console.services.system.alert_rules import RULES
from tests.receiver import Receiver

SLACK_PATH = "/services/T0001/B0002/slackSECRETtoken"
ROUTING_KEY = "R0UTINGKEYabcdef0123456789wxyz"
HOOK_SECRET = "hmac-secret-0123456789-ABCD"


def post(client, auth, path: str, data: dict | None = None):
    return client.post(path, data={"csrf_token": auth.csrf("/admin/channels"), **(data or {})})


def audit(action: str) -> list[AuditEntry]:
    db.session.expire_all()
    return db.session.execute(select(AuditEntry).where(AuditEntry.action == action)).scalars().all()


def test_the_page_shows_each_channel_masked_and_never_a_secret(app, client, auth):
    app.config.update(SLACK_WEBHOOK_URL="https://hooks.slack.com" + SLACK_PATH, PAGERDUTY_ROUTING_KEY=ROUTING_KEY,
                      ALERT_WEBHOOK_URL="", ALERT_WEBHOOK_SECRET=HOOK_SECRET, WORKORDER_URL="")
    auth.as_role("admin")
    html = client.get("/admin/channels").get_data(as_text=True)
    for secret in (SLACK_PATH, "slackSECRET", ROUTING_KEY, HOOK_SECRET):
        assert secret not in html
    slack = re.search(r'<tr id="channel-slack">(.*?)</tr>', html, re.S).group(1)
    assert "<code>https://hooks.slack.com/…oken</code>" in slack and "badge ok" in slack and "never" in slack
    pagerduty = re.search(r'<tr id="channel-pagerduty">(.*?)</tr>', html, re.S).group(1)
    assert "<code>https://events.pagerduty.com/…ueue</code>" in pagerduty and "<code>…wxyz</code>" in pagerduty
    webhook = re.search(r'<tr id="channel-webhook">(.*?)</tr>', html, re.S).group(1)
    assert "no URL: set REBOUND_ALERT_WEBHOOK_URL or save one here" in webhook and " disabled " in webhook
    assert "No failed deliveries." in html


def test_the_page_says_the_repeat_window_and_retry_waits_this_deployment_uses(app, client, auth):
    """It said "5 minutes" and "2, 4, 8 and 16 s" whatever REBOUND_ALERT_REPEAT_S and REBOUND_DELIVERY_* set."""
    auth.as_role("admin")
    page = client.get("/admin/channels").get_data(as_text=True)
    assert "a repeat within 5 min waits" in page and "retried after 2 s, 4 s, 8 s and 16 s; after attempt 5" in page
    app.config.update(ALERT_REPEAT_S=60, DELIVERY_ATTEMPTS=3, DELIVERY_BACKOFF_S=1.5)
    page = client.get("/admin/channels").get_data(as_text=True)
    assert "a repeat within 1 min waits" in page and "retried after 1.5 s and 3 s; after attempt 3" in page
    routes = re.search(r"<h2>Routing</h2>(.*?)</table>", page, re.S).group(1)
    assert "webhook (&#34;action&#34;: &#34;resolve&#34;); the work-order system is not told" in routes
    # The breaker_opened rule goes where dispatch sends it (the page said PagerDuty too).
    rule = RULES["breaker_opened"]
    assert rule.channel == "no-page" and ROUTES["no-page"] == ("slack", "webhook")
    assert "<td>The breaker_opened rule (each breaker&#39;s own alert already pages)</td><td>Slack · webhook " in routes


def test_send_test_alert_delivers_now_is_audited_and_shows_the_last_attempt(app, client, auth):
    with Receiver() as slack:
        app.config.update(SLACK_WEBHOOK_URL=slack.url + SLACK_PATH)
        auth.as_role("admin", "ada")
        response = post(client, auth, "/admin/channels/slack/test")
        assert response.status_code == 303 and response.location.endswith("/admin/channels")
        [sent] = slack.requests
        assert sent.path == SLACK_PATH and sent.json["text"].startswith(":information_source: Test alert from Rebound")
        html = client.get("/admin/channels").get_data(as_text=True)
    assert "Test alert delivered to Slack: HTTP 200" in html
    row = re.search(r'<tr id="channel-slack">(.*?)</tr>', html, re.S).group(1)
    assert ">sent</span>" in row and "HTTP 200" in row and '<span class="badge ok">on</span>' in row
    [entry] = audit("channel.test")
    assert (entry.actor, entry.target_id) == ("ada", "slack") and SLACK_PATH not in str(entry.after)


def test_a_failing_test_alert_says_why_without_the_url_as_the_channels_last_test(app, client, auth):
    with Receiver() as slack:
        slack.always(403, {"error": "invalid_token"})
        app.config.update(SLACK_WEBHOOK_URL=slack.url + SLACK_PATH)
        auth.as_role("admin")
        post(client, auth, "/admin/channels/slack/test")
        html = client.get("/admin/channels").get_data(as_text=True)
    assert "Test alert to Slack failed: 127.0.0.1 answered HTTP 403" in html and SLACK_PATH not in html
    assert len(slack.requests) == 1  # a test is tried once, and raises no "delivery failed" alert
    # It shows as the channel's last test; no alert was lost, so it is no failed delivery to send again.
    failed = re.search(r'<div class="label">Failed · 24 h</div><div class="value">(\d+)<', html).group(1)
    assert failed == "0" and "No failed deliveries." in html and "/redeliver" not in html  # no "Send again"
    row = re.search(r'<tr id="channel-slack">(.*?)</tr>', html, re.S).group(1)
    last_attempt, last_delivered = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[3:5]
    assert "never" in last_attempt and "never" in last_delivered  # no alert was ever sent through it
    test = re.search(r'<div class="ch-last-test">(.*?)</div>', row, re.S).group(1)
    assert test.startswith("Last test: <span class=\"badge failed\"") and "answered HTTP 403" in test
    # Set up, yet its latest attempt failed: said in its status, not a green "sending" beside the failure.
    assert ">failing</span>" in row and "badge ok" not in row


def test_a_test_alert_to_an_unconfigured_channel_is_refused(app, client, auth):
    app.config.update(WORKORDER_URL="")
    auth.as_role("admin")
    response = post(client, auth, "/admin/channels/workorder/test")
    assert response.status_code == 303
    assert "Work-order system is not configured: no URL" in client.get("/admin/channels").get_data(as_text=True)
    assert post(client, auth, "/admin/channels/nope/test").status_code == 404


def test_the_work_order_systems_button_says_it_sends_a_test_work_order_and_what_that_asks_of_it(app, client, auth):
    with Receiver() as orders:
        app.config.update(WORKORDER_URL=orders.url, PAGERDUTY_URL="https://events.pagerduty.com/v2/enqueue",
                          PAGERDUTY_ROUTING_KEY=ROUTING_KEY)
        auth.as_role("admin")
        html = client.get("/admin/channels").get_data(as_text=True)
        row = re.search(r'<tr id="channel-workorder">(.*?)</tr>', html, re.S).group(1)
        assert '"test": true' in row.replace("&#34;", '"') and ">Send test work order</button>" in row
        pagerduty = re.search(r'<tr id="channel-pagerduty">(.*?)</tr>', html, re.S).group(1)
        assert "Triggers a real PagerDuty incident" in pagerduty and ">Send test alert</button>" in pagerduty
        post(client, auth, "/admin/channels/workorder/test")
        [sent] = orders.requests
    assert sent.json["test"] is True and sent.headers["Idempotency-Key"].startswith("rebound-test-")
    assert "Test work order delivered to Work-order system: HTTP 200" in client.get("/admin/channels").get_data(
        as_text=True)


def test_settings_saved_here_win_over_the_env_and_stay_masked(app, client, auth):
    with Receiver() as hook:
        app.config.update(ALERT_WEBHOOK_URL="", ALERT_WEBHOOK_SECRET="")
        auth.as_role("admin", "ada")
        response = post(client, auth, "/admin/channels/webhook", {
            "webhook-url": hook.url + "/inbound/abc123", "webhook-secret": HOOK_SECRET, "webhook-enabled": "1"})
        assert response.status_code == 303
        target = targets.get("webhook")
        assert (target.url, target.secret, target.url_source, target.configured) == (
            hook.url + "/inbound/abc123", HOOK_SECRET, "console", True)
        html = client.get("/admin/channels").get_data(as_text=True)
        assert "/inbound/abc123" not in html and HOOK_SECRET not in html and "…c123" in html
        [entry] = audit("channel.update")
        # Not a character of the secret: its last four were kept for good in the chain (helper 156).
        assert entry.after == {"url": f"{hook.url}/…c123", "url_source": "console", "secret": "*** (changed)",
                               "enabled": True}
        # The same secret typed again changes nothing, and writes no row that reads the same on both sides.
        post(client, auth, "/admin/channels/webhook", {"webhook-secret": HOOK_SECRET, "webhook-enabled": "1"})
        assert len(audit("channel.update")) == 1
        manual.send_test("webhook", Actor("ada"))
        assert hook.paths() == ["/inbound/abc123/notifications/retry-alert"]
        # A blank field keeps what is saved; "forget" goes back to the env.
        post(client, auth, "/admin/channels/webhook", {"webhook-url": "", "webhook-enabled": "0"})
        db.session.expire_all()
        assert (targets.get("webhook").enabled, targets.get("webhook").secret) == (False, HOOK_SECRET)
        post(client, auth, "/admin/channels/webhook", {"webhook-forget_url": "y", "webhook-forget_secret": "y",
                                                        "webhook-enabled": "1"})
        db.session.expire_all()
        row = db.session.get(ChannelSetting, "webhook")
        assert (row.url, row.secret, targets.get("webhook").configured) == (None, None, False)


def url_box(html: str, name: str) -> tuple[str, list[str]]:
    """Return the URL input of a channel's settings form and the errors marked under it."""
    found = re.search(rf'(<input[^>]*id="{name}-url"[^>]*>)((?:<div class="field-error"[^>]*>[^<]*</div>)*)', html)
    return found.group(1), re.findall(r'<div class="field-error"[^>]*>([^<]*)</div>', found.group(2))


def test_a_bad_url_is_refused_at_its_field_keeping_what_was_typed(app, client, auth):
    auth.as_role("admin")
    response = post(client, auth, "/admin/channels/webhook", {
        "webhook-url": "hooks.example.com/inbound/abc123", "webhook-secret": HOOK_SECRET, "webhook-enabled": "0",
        "webhook-forget_secret": "y"})
    html = response.get_data(as_text=True)
    assert response.status_code == 422 and response.headers["Cache-Control"] == "no-store"
    box, errors = url_box(html, "webhook")
    # The person's own answer keeps the URL they typed, to correct it; a secret is never sent back.
    assert 'value="hooks.example.com/inbound/abc123"' in box and 'aria-invalid="true"' in box
    assert errors == ["give a full http:// or https:// URL"]
    assert HOOK_SECRET not in html and "Type it again: a secret is never sent back." in html
    settings = html[html.index('action="/admin/channels/webhook"'):]
    assert '<option selected value="0">off</option>' in settings
    assert re.search(r'<input checked[^>]*id="webhook-forget_secret"', settings)
    assert url_box(html, "slack") == ('<input autocomplete="off" id="slack-url" maxlength="500" name="slack-url" '
                                      'placeholder="https://…" type="text" value="">', [])  # the others untouched
    assert db.session.get(ChannelSetting, "webhook") is None
    too_long = post(client, auth, "/admin/channels/webhook", {"webhook-url": "https://hooks.example.com/" + "a" * 600,
                                                              "webhook-enabled": "1"})
    assert too_long.status_code == 422
    assert url_box(too_long.get_data(as_text=True), "webhook")[1] == ["keep the URL under 500 characters"]
    refused = post(client, auth, "/admin/channels/slack", {"slack-secret": "x" * 20, "slack-enabled": "1"})
    assert refused.status_code == 422 and "Slack takes no secret" in refused.get_data(as_text=True)
    assert db.session.get(ChannelSetting, "slack") is None
    # An on-call night's URLs: a 500 each (an unclosed IPv6 host, a port past 65535), or saved to fail later.
    for url, said in (("http://[::1", "give a full http:// or https:// URL (Invalid IPv6 URL)"),
                      ("http://127.0.0.1:99999/x", "give a full http:// or https:// URL (Port out of range 0-65535)"),
                      ("http://127.0.0.1:8761/x\r\nX-Evil: 1", SPACES),
                      ("http://a b/", SPACES)):
        odd = post(client, auth, "/admin/channels/webhook", {"webhook-url": url, "webhook-enabled": "1"})
        assert odd.status_code == 422 and url_box(odd.get_data(as_text=True), "webhook")[1] == [said], url
    assert db.session.get(ChannelSetting, "webhook") is None


def test_a_new_url_typed_beside_forget_the_saved_url_is_refused_not_dropped(app, client, auth):
    auth.as_role("admin")
    both = post(client, auth, "/admin/channels/webhook", {"webhook-url": "https://hooks.example.com/in/abc123",
                                                          "webhook-enabled": "1", "webhook-forget_url": "y"})
    assert both.status_code == 422 and url_box(both.get_data(as_text=True), "webhook")[1] == [
        "either type a new URL or tick Forget the saved URL, not both"]
    secret = post(client, auth, "/admin/channels/webhook", {"webhook-secret": HOOK_SECRET, "webhook-enabled": "1",
                                                            "webhook-forget_secret": "y"})
    assert secret.status_code == 422 and "either type a new hmac secret or tick Forget, not both" in (
        secret.get_data(as_text=True))
    assert db.session.get(ChannelSetting, "webhook") is None


SPACES = "a URL has no spaces, line breaks or other control characters; write a space as %20"


def test_a_url_from_the_environment_that_is_no_url_is_masked_not_a_500():
    assert targets.mask_url("http://127.0.0.1:99999/hook/secret") == "(not a URL Rebound can use)"
    # A query's token is never shown: its last 4 characters were the whole of `?token=T`.
    assert targets.mask_url("http://127.0.0.1:8912/itsm?token=T") == "http://127.0.0.1:8912/…?…"
    assert targets.mask_url("https://hooks.example.com/inbound/abc123?key=Q%2B1") == "https://hooks.example.com/…c123?…"
    assert targets.mask_url("http://[::1/hook") == "(not a URL Rebound can use)"


def test_only_admins_reach_channels(app, client, auth):
    auth.as_role("operator")
    assert client.get("/admin/channels").status_code == 403
    token = auth.csrf("/workorders")
    for path in ("/admin/channels/slack/test", "/admin/channels/slack", "/admin/channels/messages/1/redeliver"):
        assert client.post(path, data={"csrf_token": token}).status_code == 403
    assert audit("channel.test") == [] and audit("channel.update") == []


def test_the_channels_tab_is_in_the_admin_area(app, client, auth):
    auth.as_role("admin")
    html = client.get("/admin/users").get_data(as_text=True)
    assert 'href="/admin/channels">Channels</a>' in html
