"""Outbox delivery to real local HTTP servers: exact payloads, retries with backoff, dedup, resolve, exclusivity."""

import hashlib
import hmac
import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select, update

from console.domain import periods
from console.domain.errors import Failure
from console.extensions import db
from console.models import AlertRule, DeadLetter, Delivery, OutboxMessage, Run, WorkOrder
from console.services.actor import Actor
from console.services.delivery import channel_report, dispatch, manual, outbox, silence
from console.services.engine import breaker_admin, control
from console.services.engine import parking as dead_letters
from console.services.engine.breakers import BreakerKey
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.errors import Conflict
from console.services.people import tenants
from console.services.reports import figures as report_figures
from console.services.reports.read import Scope
from console.services.system import alert_measures, alert_rules, delivery_round
from console.services.system.maintenance import MAINTENANCE
from console.services.workorders import changes
from console.services.workorders import orders as workorders
from tests.helpers import wait_for
from tests.receiver import Receiver

SLACK_PATH = "/services/T0001/B0002/XXXXslackSECRETpath"
ROUTING_KEY = "R0UTINGKEYabcdef0123456789wxyz"
WEBHOOK_SECRET = "hmac-secret-for-tests"
CONSOLE = "https://rebound.example.com"
ONE_ATTEMPT = {"max_attempts": 1, "base_delay_s": 1, "jitter": 0}
HANDLER = "python:demo.flaky"  # the name a registered Python handler is stored under
ops = Actor("alice", 1)


@pytest.fixture
def channels(app):
    """Four receivers standing in for Slack, PagerDuty, the alert webhook and the work-order system."""
    with Receiver() as slack, Receiver() as pagerduty, Receiver() as hook, Receiver() as orders:
        pagerduty.always(202, {"status": "success", "message": "Event processed"})
        app.config.update(SLACK_WEBHOOK_URL=slack.url + SLACK_PATH, PAGERDUTY_URL=pagerduty.url + "/v2/enqueue",
                          PAGERDUTY_ROUTING_KEY=ROUTING_KEY, ALERT_WEBHOOK_URL=hook.url + "/hooks",
                          ALERT_WEBHOOK_SECRET=WEBHOOK_SECRET, WORKORDER_URL=orders.url + "/itsm",
                          CONSOLE_URL=CONSOLE)
        yield type("Channels", (), {"slack": slack, "pagerduty": pagerduty, "webhook": hook, "workorder": orders})


def only(app, **urls):
    """Configure just some channels (the others are switched off)."""
    app.config.update({"SLACK_WEBHOOK_URL": "", "PAGERDUTY_ROUTING_KEY": "", "ALERT_WEBHOOK_URL": "",
                       "WORKORDER_URL": "", "CONSOLE_URL": CONSOLE, **urls})


def dead_run(clock, message="upstream 502 for order 4411", code="upstream_502", task=None, params=None) -> Run:
    """Drive one run to dead (one attempt, retryable error), as a worker would."""
    run, _ = submit(tenants.find("default"), Actor("test"), handler=None if task else "demo.flaky", task=task,
                    params={"fail_times": 9, "message": message, "code": code, **(params or {})},
                    policy=ONE_ATTEMPT, clock=clock)
    assert execute(run.id, 0, clock=clock) == "dead"
    db.session.expire_all()
    return db.session.get(Run, run.id)


def messages(kind=None) -> list[OutboxMessage]:
    db.session.expire_all()
    query = select(OutboxMessage).order_by(OutboxMessage.id)
    return db.session.execute(query.where(OutboxMessage.kind == kind) if kind else query).scalars().all()


def alert_rows(rule: str) -> list[OutboxMessage]:
    return [m for m in messages("alert") if m.payload.get("rule") == rule]


def test_the_outbox_job_runs_every_2_s_with_a_stable_id():
    [job] = [job for job in MAINTENANCE if job.id == "outbox"]
    assert (job.func, job.seconds) == ("console.services.system.delivery_round:tick", 2)


def test_slack_gets_text_and_blocks_with_links_back_to_the_console(app, channels, clock):
    run = dead_run(clock)
    [letter] = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)).scalars().all()
    assert delivery_round.tick(clock)["delivered"] == 2  # the alert and the work order
    [sent] = channels.slack.requests
    assert sent.path == SLACK_PATH and sent.headers["Content-Type"] == "application/json"
    body = sent.json
    order_url = f"{CONSOLE}/workorders/{letter.work_order_id}"
    assert set(body) == {"text", "blocks"}
    assert body["text"].startswith(f":red_circle: Retry limit reached: {HANDLER} — upstream_502: 1 dead letter in "
                                   f"this group: {HANDLER} failed with upstream_502 after 1 attempt: upstream 502 "
                                   "for order 4411")
    assert body["text"].endswith(f"<{order_url}|Open in Rebound>")
    kinds = [block["type"] for block in body["blocks"]]
    assert kinds == ["section", "section", "actions", "context"]
    assert body["blocks"][0]["text"]["text"].startswith(
        f":red_circle: *Retry limit reached: {HANDLER} — upstream_502*")
    fields = {f["text"].split("\n")[0]: f["text"].split("\n")[1] for f in body["blocks"][1]["fields"]}
    assert fields["*Tenant*"] == "default" and fields["*Error code*"] == "upstream_502"
    assert fields["*Work order*"] == f"#{letter.work_order_id} (open)"
    buttons = {b["text"]["text"]: b["url"] for b in body["blocks"][2]["elements"]}
    assert buttons == {f"Work order #{letter.work_order_id}": order_url,
                       "Dead letters of this group": f"{CONSOLE}/dlq/?group={letter.fingerprint}",
                       f"Run #{run.id}": f"{CONSOLE}/runs/{run.id}"}


def test_pagerduty_gets_an_events_v2_trigger_keyed_by_the_work_order(app, channels, clock):
    run = dead_run(clock)
    delivery_round.tick(clock)
    [sent] = channels.pagerduty.requests
    event = sent.json
    order_id = db.session.execute(select(DeadLetter.work_order_id).where(DeadLetter.run_id == run.id)).scalar_one()
    assert sent.path == "/v2/enqueue"
    assert set(event) == {"routing_key", "event_action", "dedup_key", "payload", "links", "client", "client_url"}
    assert (event["routing_key"], event["event_action"], event["dedup_key"]) == (
        ROUTING_KEY, "trigger", f"rebound-workorder-{order_id}")
    payload = event["payload"]
    assert set(payload) == {"summary", "source", "severity", "timestamp", "component", "group", "class",
                            "custom_details"}
    assert payload["summary"].startswith(f"Retry limit reached: {HANDLER} — upstream_502: 1 dead letter in this group")
    assert (payload["source"], payload["severity"], payload["component"], payload["group"], payload["class"]) == (
        "rebound.example.com", "error", HANDLER, "default", "retry_limit_reached")
    assert payload["timestamp"] == clock().isoformat()
    details = payload["custom_details"]
    assert (details["run_id"], details["error_code"], details["occurrences"]) == (run.id, "upstream_502", 1)
    assert event["links"][0] == {"href": f"{CONSOLE}/workorders/{order_id}", "text": f"Work order #{order_id}"}
    assert {"href": f"{CONSOLE}/runs/{run.id}", "text": f"Run #{run.id}"} in event["links"]


def test_webhook_posts_retry_alerts_and_sla_breaches_to_their_paths_signed_with_hmac(app, channels, clock):
    dead_run(clock)
    outbox.add("alert", "sla:7:deadline", {"rule": "sla_breach", "task": "nightly-report", "run_id": 99,
                                           "kind": "deadline", "late_by_s": 95, "scheduled_for": "2026-01-05T02:00"},
               clock(), channel="sla-breach")
    db.session.commit()
    delivery_round.tick(clock)
    assert channels.webhook.paths() == ["/hooks/notifications/retry-alert", "/hooks/notifications/sla-breach"]
    for sent in channels.webhook.requests:
        expected = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), sent.body, hashlib.sha256).hexdigest()
        assert sent.headers["X-Rebound-Signature"] == expected
    retry, sla = (sent.json for sent in channels.webhook.requests)
    assert (retry["event"], retry["severity"], retry["tenant"], retry["occurrences"]) == (
        "retry_limit_reached", "error", "default", 1)
    assert retry["url"].startswith(f"{CONSOLE}/workorders/")
    assert (sla["event"], sla["title"]) == ("sla_breach", "SLA breach: nightly-report")
    assert sla["summary"] == "Run #99 of nightly-report missed its deadline by 95 s (scheduled 2026-01-05T02:00)."
    # SLA breaches go to the webhook and Slack, not to PagerDuty.
    assert len(channels.pagerduty.requests) == 1
    assert any("SLA breach: nightly-report" in r.json["text"] for r in channels.slack.requests)


def test_a_channel_url_with_a_query_or_a_trailing_slash_keeps_both_where_they_belong(app, channels, clock):
    """The path was appended to the whole URL: `…/hook?key=Q` was posted at `/hook?key=Q/notifications/…`."""
    app.config.update(ALERT_WEBHOOK_URL=channels.webhook.url + "/hooks/?key=Q%2B1",
                      WORKORDER_URL=channels.workorder.url + "/itsm?token=T")
    dead_run(clock)
    delivery_round.tick(clock)
    assert channels.webhook.paths() == ["/hooks/notifications/retry-alert?key=Q%2B1"]
    assert channels.workorder.paths() == ["/itsm/ops/workorders?token=T"]


def test_work_orders_are_signed_with_their_own_secret_when_one_is_set(app, channels, clock):
    """The work-order system could not tell Rebound's requests from anyone's: no signature, no auth header."""
    app.config.update(WORKORDER_SECRET="orders-secret")
    dead_run(clock)
    delivery_round.tick(clock)
    [sent] = channels.workorder.requests
    assert sent.headers["X-Rebound-Signature"] == (
        "sha256=" + hmac.new(b"orders-secret", sent.body, hashlib.sha256).hexdigest())
    app.config.update(WORKORDER_SECRET="")
    dead_run(clock, code="upstream_503")  # another error group: a new work order
    delivery_round.tick(clock)
    assert "X-Rebound-Signature" not in channels.workorder.requests[-1].headers


def test_a_tampered_body_does_not_match_its_signature(app, channels, clock):
    dead_run(clock)
    delivery_round.tick(clock)
    [sent] = channels.webhook.requests
    forged = sent.body.replace(b'"occurrences":1', b'"occurrences":0')
    assert forged != sent.body
    assert sent.headers["X-Rebound-Signature"] != (
        "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), forged, hashlib.sha256).hexdigest())


def test_manager_escalation_pages_pagerduty_at_critical_and_tells_slack_and_the_sla_webhook(app, channels, clock):
    """A receiver of seed 001's /notifications/sla-breach heard of each breach but not of the escalation they caused
    (helper 132): it gets that too, at the same endpoint."""
    outbox.add("escalation", "sla-escalation:3:120", {"rule": "sla_consecutive_breaches", "task": "billing-sync",
                                                      "runs": [118, 119, 120], "count": 3}, clock(), channel="manager")
    db.session.commit()
    assert delivery_round.tick(clock)["delivered"] == 1
    [page] = channels.pagerduty.requests
    assert page.json["payload"]["severity"] == "critical"
    assert page.json["payload"]["summary"].startswith("SLA breached 3 runs in a row: billing-sync")
    [note] = channels.slack.requests
    assert note.json["text"].startswith(":rotating_light: SLA breached 3 runs in a row: billing-sync")
    [told] = channels.webhook.requests
    assert told.path == "/hooks/notifications/sla-breach" and told.json["event"] == "sla_consecutive_breaches"
    assert told.json["severity"] == "critical" and told.headers["X-Rebound-Signature"].startswith("sha256=")


def test_work_order_is_posted_with_failure_and_task_context_and_keeps_the_external_id(app, channels, clock):
    channels.workorder.reply(201, {"id": "WO-4411", "status": "new"})
    run = dead_run(clock)
    delivery_round.tick(clock)
    [sent] = channels.workorder.requests
    order = db.session.get(WorkOrder, db.session.execute(
        select(DeadLetter.work_order_id).where(DeadLetter.run_id == run.id)).scalar_one())
    assert sent.path == "/itsm/ops/workorders"
    assert sent.headers["Idempotency-Key"] == f"rebound-workorder-{order.id}"
    body = sent.json
    assert (body["work_order_id"], body["title"], body["tenant"], body["handler"], body["test"]) == (
        order.id, order.title, "default", HANDLER, False)
    assert body["failure"] == {"error_code": "upstream_502", "reason": "upstream 502 for order 4411",
                               "first_run_id": run.id, "dead_letters": 1}
    assert body["url"] == f"{CONSOLE}/workorders/{order.id}"
    assert order.external_id == "WO-4411"
    [request] = messages("workorder")
    assert (request.status, request.attempts) == ("delivered", 1)


def test_work_order_carries_its_task(app, channels, clock):
    from console.services.scheduling import tasks as task_service

    task = task_service.register(tenants.find("default"), {"name": "charge-cards", "handler": "demo.flaky",
                                                            "event": "cards.charge"},
                                 Actor("test"))
    dead_run(clock, task=task)
    delivery_round.tick(clock)
    [sent] = channels.workorder.requests
    assert sent.json["task"] == {"id": task.id, "name": "charge-cards"}
    assert {"href": f"{CONSOLE}/tasks/{task.id}", "text": "Task charge-cards"} in sent.json["links"]


def test_a_receivers_error_text_is_masked_as_a_log_line_is_its_urls_query_too(app, clock):
    """A receiver repeating the request's URL put a channel URL's ?key=… on work orders and the Overview for every
    viewer, and the secrets its error text named were masked in the log but not on the pages (helper 127)."""
    with Receiver() as slack:
        slack.always(500, {"echo": "path=/hook/x?key=querysecret99", "detail": "db_password=hunter2hunter2 "
                                                                              "aws_secret_access_key=AKIAFAKE12345"})
        only(app, SLACK_WEBHOOK_URL=slack.url + "/hook/x?key=querysecret99")
        dead_run(clock)
        [alert] = alert_rows("retry_limit_reached")
        delivery_round.tick(clock)
        db.session.expire_all()
        stored = db.session.get(OutboxMessage, alert.id).last_error
        assert stored.startswith("slack: 127.0.0.1 answered HTTP 500")
        for secret in ("querysecret99", "hunter2hunter2", "AKIAFAKE12345"):
            assert secret not in stored, stored
        # Named past the 200 characters shown: it was cut there first, and half of it no longer matched (helper 128).
        slack.always(401, {"detail": "x" * 178 + " key querysecret99"})  # it starts at the 196th character
        clock.advance(60)
        delivery_round.tick(clock)
        db.session.expire_all()
        stored = db.session.get(OutboxMessage, alert.id).last_error
        assert "query" not in stored and "answered HTTP 401" in stored, stored


def test_a_failing_channel_is_retried_with_backoff_then_failed_with_a_delivery_failed_alert(app, clock, caplog):
    with Receiver() as slack:
        slack.always(500, {"error": "internal"})
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH)
        dead_run(clock)
        [alert] = alert_rows("retry_limit_reached")
        gaps = []
        for attempt in range(1, 6):
            assert delivery_round.tick(clock)["retrying" if attempt < 5 else "failed"] == 1
            assert len(slack.requests) == attempt
            assert delivery_round.tick(clock).get("retrying", 0) == 0  # nothing is due before its backoff ends
            db.session.expire_all()
            row = db.session.get(OutboxMessage, alert.id)
            if attempt < 5:
                gaps.append((row.next_attempt_at - clock()).total_seconds())
                clock.advance(gaps[-1])
        assert gaps == [2.0, 4.0, 8.0, 16.0]
        assert (row.status, row.attempts, row.delivered_at) == ("failed", 5, None)
        assert row.last_error == 'slack: 127.0.0.1 answered HTTP 500: {"error": "internal"}'
        [failed] = alert_rows("delivery_failed")
        assert (failed.payload["failed_outbox_id"], failed.payload["failed_channels"]) == (alert.id, ["slack"])
        assert failed.payload["skip_channels"] == ["slack"]
        # Its own delivery leaves Slack out; with nothing else configured it is recorded, not looped.
        delivery_round.tick(clock)
        db.session.expire_all()
        assert db.session.get(OutboxMessage, failed.id).status == "skipped"
        assert len(slack.requests) == 5
        assert len(alert_rows("delivery_failed")) == 1
    logged = caplog.text
    assert SLACK_PATH not in logged and "XXXX" not in logged


def test_a_message_goes_to_its_channels_at_once(app, channels, clock):
    app.config.update(DELIVERY_TIMEOUT_S=2)
    # Slack answers only once the webhook has been asked: sent one after the other, Slack (first) would time out.
    channels.slack.hold = lambda: wait_for(lambda: channels.webhook.requests, 3, what="the webhook asked")
    dead_run(clock)
    delivery_round.tick(clock)
    [alert] = alert_rows("retry_limit_reached")
    assert {d.channel: d.outcome for d in channel_report.deliveries_of([alert.id])} == {
        "slack": "sent", "pagerduty": "sent", "webhook": "sent"}


def test_a_receiver_that_gives_no_answer_holds_up_no_other_channel(app, channels, clock):
    """An on-call walk: with the webhook silent, every 2-s round waited 5 s on it before Slack and PagerDuty heard of
    the round's other alerts."""
    app.config.update(DELIVERY_TIMEOUT_S=2)
    answered = threading.Event()
    channels.webhook.hold = lambda: answered.wait(10)
    for code in ("upstream_502", "card_declined", "db_timeout"):
        dead_run(clock, code=code, message=f"{code} for order 4411")
    first, *others = alert_rows("retry_limit_reached")
    try:
        assert delivery_round.tick(clock)["retrying"] == 3
        # Waited on once; every alert reached Slack and PagerDuty.
        assert len(channels.webhook.requests) == 1
        assert (len(channels.slack.requests), len(channels.pagerduty.requests)) == (3, 3)
        for alert in others:
            [untried] = [d for d in channel_report.deliveries_of([alert.id]) if d.channel == "webhook"]
            assert untried.outcome == "not_tried" and untried.duration_ms == 0
            assert untried.error.startswith(f"not tried: no answer from 127.0.0.1 within 2 s for message #{first.id}")
            assert (db.session.get(OutboxMessage, alert.id).next_attempt_at - clock()).total_seconds() >= 59
        # The next rounds do not wait on it either, for a minute: a new alert reaches the others at once.
        clock.advance(10)
        dead_run(clock, code="disk_full", message="disk full")
        delivery_round.tick(clock)
        assert len(channels.webhook.requests) == 1 and len(channels.slack.requests) == 4
        # Admin → Channels shows the timeout, not the attempts that did not wait on it.
        [webhook] = [state for state in channel_report.channels() if state.target.name == "webhook"]
        assert webhook.failing and webhook.last.error == "no answer from 127.0.0.1 within 2 s"
    finally:
        answered.set()
    # Once the silence is over one message tries it again; it answers, and the rest go to it at once.
    channels.webhook.hold = lambda: None
    clock.advance(60)
    assert delivery_round.tick(clock)["delivered"] == 4
    assert len(channels.webhook.requests) == 5
    assert (len(channels.slack.requests), len(channels.pagerduty.requests)) == (4, 4)


def test_a_message_waits_for_a_silent_channel_without_losing_attempts_it_never_made(app, channels, clock):
    """A second walk: of 16 messages failed on a hanging webhook, 11 had never asked it (five 'not tried' attempts),
    and the one that did ask used its next attempt inside the silence it had just begun."""
    app.config.update(DELIVERY_TIMEOUT_S=1)
    answered = threading.Event()
    channels.webhook.hold = lambda: answered.wait(10)
    try:
        dead_run(clock, code="code_a")
        dead_run(clock, code="code_b")
        asked, untried = alert_rows("retry_limit_reached")
        delivery_round.tick(clock)
    finally:
        answered.set()
    db.session.expire_all()
    asked, untried = db.session.get(OutboxMessage, asked.id), db.session.get(OutboxMessage, untried.id)
    # The one that asked waits out the silence it began; the other is due then too, its attempt given back.
    assert (asked.attempts, (asked.next_attempt_at - clock()).total_seconds() >= 58) == (1, True)
    assert (untried.attempts, (untried.next_attempt_at - clock()).total_seconds() >= 58) == (0, True)
    assert untried.last_error.startswith("webhook: not tried: no answer from 127.0.0.1 within 1 s")
    # Kept silent for good: a never-asked message is failed only once it is older than its attempts a minute apart.
    channels.webhook.hold = lambda: None
    for _ in range(12):
        clock.advance(61)
        silence.timed_out("webhook", "no answer from 127.0.0.1 within 1 s", asked.id, clock())
        delivery_round.tick(clock)
        db.session.expire_all()
        if db.session.get(OutboxMessage, untried.id).status == "failed":
            break
    assert db.session.get(OutboxMessage, untried.id).status == "failed"
    assert (clock() - untried.created_at).total_seconds() > 5 * 60
    assert len(channels.webhook.requests) == 1  # only the first message ever asked it


def test_a_test_sent_from_the_channels_page_ends_its_silence_and_what_waited_goes_at_once(app, channels, clock):
    """A third walk: after a test from the page got through, the alerts waiting out the webhook's silence still
    waited up to a minute."""
    silence.timed_out("webhook", "no answer from 127.0.0.1 within 5 s", 1, clock())
    dead_run(clock)
    delivery_round.tick(clock)  # Slack and PagerDuty take it; the silent webhook is not tried
    [alert] = alert_rows("retry_limit_reached")
    db.session.expire_all()
    assert (db.session.get(OutboxMessage, alert.id).next_attempt_at - clock()).total_seconds() >= 59
    manual.send_test("webhook", ops, clock)  # tried even while silent; it answers
    assert silence.why("webhook", clock()) is None
    assert delivery_round.tick(clock)["delivered"] == 1  # at once, not when the minute is up
    assert [r.path for r in channels.webhook.requests] == ["/hooks/notifications/retry-alert"] * 2


def test_send_again_asks_a_silent_channel_at_once(app, clock):
    """A third walk: messages sent again after the receiver was fixed waited out its silence (35-46 s)."""
    with Receiver() as hook:
        hook.always(500)
        only(app, ALERT_WEBHOOK_URL=hook.url)
        outbox.add("alert", "queue_overflow:1:demo.noop", {"rule": "queue_overflow", "tenant_id": 1,
                                                           "handler": "demo.noop", "limit": "queue_limit",
                                                           "current": 10, "max": 10}, clock())
        db.session.commit()
        lost = fail_for_good(alert_rows("queue_overflow")[0].id, clock)
        hook.always(200)
        silence.timed_out("webhook", "no answer from 127.0.0.1 within 5 s", lost.id, clock())
        manual.redeliver(lost.id, ops, clock=clock)
        assert delivery_round.tick(clock)["delivered"] == 1


def rule_pages_for_work_orders(on: bool) -> None:
    """Switch the "work-order creation failed" rule (on by default): while it is on, it is their page."""
    db.session.execute(update(AlertRule).where(AlertRule.key == "workorder_failed").values(enabled=on))
    db.session.commit()


def test_a_work_order_system_outage_pages_once_through_its_rule(app, clock):
    """Each failed request raised a "delivery failed" alert beside the rule's, two incidents for one outage."""
    with Receiver() as slack, Receiver() as orders:
        orders.always(503)
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH, WORKORDER_URL=orders.url)
        dead_run(clock)
        request = fail_for_good(messages("workorder")[0].id, clock)
        order_id = request.payload["work_order_id"]
        assert alert_rows("delivery_failed") == []
        assert alert_rules.evaluate(clock)["workorder_failed"] == "firing"  # beside the dead letter's own rule
        delivery_round.tick(clock)
        [page] = [r.json["text"] for r in slack.requests if "creation failed" in r.json["text"]]
        assert page.startswith(":red_circle: Work-order creation failed: 1 work order could not be created in the "
                               f"work-order system; the last, work order #{order_id}: 127.0.0.1 answered HTTP 503")
        assert f"<{CONSOLE}/admin/channels|Open in Rebound>" in page  # where it is sent again

        orders.always(200, {"id": 777})
        manual.redeliver(request.id, ops, clock=clock)
        delivery_round.tick(clock)
        assert alert_rules.evaluate(clock)["workorder_failed"] == "ok"
        delivery_round.tick(clock)
        assert [(m.kind, m.status) for m in messages() if m.dedup_key == "rule:workorder_failed"] == [
            ("alert", "delivered"), ("resolve", "delivered")]
        assert alert_rows("delivery_failed") == []


def test_work_order_creation_failed_is_alerted_on_the_other_channels_with_its_rule_off(app, clock):
    with Receiver() as slack, Receiver() as orders:
        orders.always(503)
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH, WORKORDER_URL=orders.url)
        rule_pages_for_work_orders(False)
        run = dead_run(clock)
        for _ in range(5):
            delivery_round.tick(clock)
            clock.advance(30)
        [request] = messages("workorder")
        assert (request.status, request.attempts) == ("failed", 5)
        delivery_round.tick(clock)
        texts = [r.json["text"] for r in slack.requests]
        order_id = db.session.execute(select(DeadLetter.work_order_id).where(DeadLetter.run_id == run.id)).scalar_one()
        [failure] = [text for text in texts if "Work order creation failed" in text]
        assert f"Work order #{order_id} (" in failure and "after 5 attempts: 127.0.0.1 answered HTTP 503" in failure
        assert f"<{CONSOLE}/workorders/{order_id}|Open in Rebound>" in failure
        assert db.session.get(WorkOrder, order_id).external_id is None


def test_a_delivery_failed_alert_that_fails_does_not_raise_another(app, clock):
    with Receiver() as slack, Receiver() as hook:
        slack.always(500)
        hook.always(500)
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH, ALERT_WEBHOOK_URL=hook.url)
        outbox.add("alert", "queue_overflow:1:demo.noop", {"rule": "queue_overflow", "tenant_id": 1,
                                                           "handler": "demo.noop", "limit": "queue_limit",
                                                           "current": 10, "max": 10}, clock())
        db.session.commit()
        for _ in range(12):
            delivery_round.tick(clock)
            clock.advance(60)
        [overflow] = alert_rows("queue_overflow")
        assert (overflow.status, overflow.attempts) == ("failed", 5)
        # Both channels failed, so the 'delivery failed' alert had nowhere left to go.
        [failed] = alert_rows("delivery_failed")
        assert failed.payload["failed_channels"] == ["slack", "webhook"] and failed.status == "skipped"


def test_a_delivery_failed_alert_that_fails_on_its_own_channel_stops_there(app, clock):
    with Receiver() as slack, Receiver() as hook, Receiver() as orders:
        for receiver in (slack, hook, orders):
            receiver.always(500)
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH, ALERT_WEBHOOK_URL=hook.url, WORKORDER_URL=orders.url)
        # A work-order request fails on its system; its 'delivery failed' alert then tries Slack and the webhook,
        # which fail too: that alert is failed, and raises no alert of its own.
        rule_pages_for_work_orders(False)
        outbox.add("workorder", "workorder:1", {"work_order_id": None, "title": "x"}, clock())
        db.session.commit()
        for _ in range(12):
            delivery_round.tick(clock)
            clock.advance(60)
        [failed] = alert_rows("delivery_failed")
        assert (failed.payload["skip_channels"], failed.status, failed.attempts) == (["workorder"], "failed", 5)
        assert len(hook.requests) == 5 and len(slack.requests) == 5 and len(orders.requests) == 5
        assert len(alert_rows("delivery_failed")) == 1


def test_a_storm_of_1000_dead_letters_in_one_group_is_one_alert_with_a_count(app, channels, clock):
    tenant = tenants.find("default")
    now = clock()
    rows = [{"tenant_id": tenant.id, "handler": "payments.charge", "params": {}, "policy_overrides": {},
             "idempotency_key": f"storm-{n}", "status": "dead", "attempt": 3, "series": 1, "executions": 3,
             "progress": 0, "source": "api", "cancel_requested": False, "created_at": now, "updated_at": now}
            for n in range(1000)]
    ids = db.session.execute(insert(Run).returning(Run.id), rows).scalars().all()
    failure = Failure("card_declined", "card declined by issuer", retryable=True)
    for run in db.session.execute(select(Run).where(Run.id.in_(ids))).scalars():
        dead_letters.park(run, failure, "exhausted", now)
    db.session.commit()
    [alert] = messages("alert")
    assert (alert.occurrences, alert.payload["rule"]) == (1000, "retry_limit_reached")
    [order] = db.session.execute(select(WorkOrder)).scalars().all()
    assert order.dead_letter_count == 1000
    assert len(messages("workorder")) == 1
    delivery_round.tick(clock)
    [slack] = channels.slack.requests
    assert "1000 dead letters in this group: payments.charge failed with card_declined" in slack.json["text"]
    [page] = channels.pagerduty.requests
    assert page.json["payload"]["custom_details"]["occurrences"] == 1000
    assert len(channels.webhook.requests) == 1 and len(channels.workorder.requests) == 1


def test_a_repeat_soon_after_is_held_back_and_sent_once_with_its_count(app, channels, clock):
    first = dead_run(clock, message="bad row 1")
    delivery_round.tick(clock)
    assert len(channels.slack.requests) == 1
    clock.advance(5)
    for n in (2, 3):
        dead_run(clock, message=f"bad row {n}")
    assert delivery_round.tick(clock)["held"] == 1
    assert len(channels.slack.requests) == 1
    repeat = alert_rows("retry_limit_reached")[-1]
    assert repeat.next_attempt_at == first.finished_at + timedelta(seconds=300)
    clock.advance(295)
    assert delivery_round.tick(clock)["delivered"] == 1
    assert "2 more dead letters in this group (3 in all)" in channels.slack.requests[-1].json["text"]
    # PagerDuty keeps both in the work order's one incident.
    assert len({r.json["dedup_key"] for r in channels.pagerduty.requests}) == 1


def test_one_held_repeat_is_said_in_the_singular(app, channels, clock):
    dead_run(clock, message="bad row 1")
    delivery_round.tick(clock)
    clock.advance(5)
    dead_run(clock, message="bad row 2")
    assert delivery_round.tick(clock)["held"] == 1
    clock.advance(295)
    assert delivery_round.tick(clock)["delivered"] == 1
    assert "1 more dead letter in this group (2 in all)" in channels.slack.requests[-1].json["text"]  # was "letters"


def test_a_failure_of_a_group_whose_work_order_was_just_closed_is_told_at_once(app, channels, clock):
    first = dead_run(clock, message="bad row 1")
    delivery_round.tick(clock)
    assert len(channels.slack.requests) == 1
    order = db.session.get(WorkOrder, runs_letters(first.id)[0].work_order_id)
    changes.close(order, "fixed the schema", Actor("olga"), clock)
    clock.advance(5)
    again = dead_run(clock, message="bad row 2")  # a new incident: its own work order
    assert runs_letters(again.id)[0].work_order_id != order.id
    assert delivery_round.tick(clock)["held"] == 0  # not held for the closed order's 300 s repeat window
    assert "bad row 2" in channels.slack.requests[-1].json["text"]


def closed_with_a_repeat_held(clock) -> WorkOrder:
    """A work order whose first alert went out and whose repeat was held back, closed by a person meanwhile."""
    first = dead_run(clock, message="bad row 1")
    delivery_round.tick(clock)
    clock.advance(5)
    dead_run(clock, message="bad row 2")
    assert delivery_round.tick(clock)["held"] == 1
    order = db.session.get(WorkOrder, runs_letters(first.id)[0].work_order_id)
    changes.close(order, "fixed the schema", Actor("olga"), clock)
    return order


def test_a_new_work_orders_first_alert_is_not_merged_into_the_closed_ones_held_repeat(app, channels, clock):
    # The new letter joined the pending repeat (one pending row per key): told 4 minutes late, counted with the closed
    # order's letters, listed on the closed order's page and not on its own (helper 108).
    order = closed_with_a_repeat_held(clock)
    clock.advance(5)
    again = dead_run(clock, message="bad row 3")
    new_order = runs_letters(again.id)[0].work_order_id
    assert delivery_round.tick(clock)["held"] == 0
    told = channels.slack.requests[-1].json["text"]
    assert "1 dead letter in this group" in told and "bad row 3" in told  # its own first alert, one letter, at once

    def alerts_on_the_page_of(order_id):
        return {m.payload["work_order_id"] for m in workorders.detail(order_id).messages if m.kind == "alert"}

    assert alerts_on_the_page_of(new_order) == {new_order} and alerts_on_the_page_of(order.id) == {order.id}


def test_a_held_repeat_of_a_work_order_closed_meanwhile_is_not_sent_after_its_resolve(app, channels, clock):
    """The repeat went out minutes after the close: PagerDuty's incident, just resolved, was triggered again."""
    order = closed_with_a_repeat_held(clock)
    clock.advance(300)
    delivery_round.tick(clock)
    events = [r.json["event_action"] for r in channels.pagerduty.requests]
    assert events == ["trigger", "resolve"]
    # The webhook is told of the resolve too, on the incident's key (it had "action": "trigger" and no end).
    assert [(r.json["action"], r.json["dedup_key"]) for r in channels.webhook.requests] == [
        ("trigger", f"rebound-workorder-{order.id}"), ("resolve", f"rebound-workorder-{order.id}")]
    assert len(channels.slack.requests) == 2  # the first alert, the resolve
    repeat = alert_rows("retry_limit_reached")[-1]
    assert repeat.status == "skipped" and repeat.last_error.startswith(
        f"not sent: work order #{order.id} was closed at ") and "this alert would open it again" in repeat.last_error
    with pytest.raises(Conflict, match=f"work order #{order.id} was closed at .*; it is not sent again"):
        manual.redeliver(repeat.id, ops, clock=clock)


def test_a_closed_work_orders_request_is_not_sent_again(app, clock):
    """"Send again" on a closed work order opened a ticket in the work-order system for work already done."""
    only(app)  # no channel: the request is skipped, as before the channels were set up
    run = dead_run(clock)
    delivery_round.tick(clock)
    [request] = messages("workorder")
    assert request.status == "skipped"
    changes.close(db.session.get(WorkOrder, request.payload["work_order_id"]), "done", Actor("olga"), clock)
    with pytest.raises(Conflict, match="its request to the work-order system would open it again"):
        manual.redeliver(request.id, ops, clock=clock)
    assert messages("workorder")[0].status == "skipped" and run.status == "dead"


def test_an_alert_repeated_while_it_was_out_is_retried_as_one_message(app, clock):
    with Receiver() as slack:
        slack.always(500, {"error": "internal"})
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH)
        dead_run(clock, message="bad row 1")
        [out] = alert_rows("retry_limit_reached")
        claim = dispatch.claim_next(clock(), out.id)
        dead_run(clock, message="bad row 2")  # the claimed row is no longer pending: a new pending row is queued
        assert dispatch.deliver(claim, clock) == "merged"  # back to pending would make two pending rows of one key
        out, queued = alert_rows("retry_limit_reached")
        assert (out.status, queued.status, queued.occurrences) == ("skipped", "pending", 2)
        assert out.last_error.startswith(f"merged into #{queued.id}")
        with pytest.raises(Conflict, match=f"message #{queued.id} with the same key is already waiting"):
            manual.redeliver(out.id, ops, clock=clock)


def test_a_failing_channel_keeps_its_backoff_through_a_storm_of_repeats(app, clock):
    """Each death of a storm queued a new row while the last was out; the failed one folded into it, which went out
    at once as attempt 1: 24 POSTs in a second to a failing receiver (helper 143). The fold carries the backoff."""
    with Receiver() as slack:
        slack.always(500, {"error": "internal"})
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH)
        dead_run(clock, message="bad row 0")
        for n in range(1, 4):
            due = [m.id for m in alert_rows("retry_limit_reached") if m.status == "pending" and
                   m.next_attempt_at <= clock()]
            if not due:
                break
            claim = dispatch.claim_next(clock(), due[0])
            dead_run(clock, message=f"bad row {n}")  # it is out: the death queues a new row
            dispatch.deliver(claim, clock)
        assert len(slack.requests) == 1
        queued = alert_rows("retry_limit_reached")[-1]
        assert (queued.status, queued.attempts, queued.occurrences) == ("pending", 1, 2)
        assert queued.next_attempt_at == clock() + timedelta(seconds=2) and queued.last_error.startswith("slack:")
        clock.advance(2)
        claim = dispatch.claim_next(clock(), queued.id)
        assert claim.attempt == 2 and dispatch.deliver(claim, clock) == "retrying"
        assert len(slack.requests) == 2


def test_a_held_repeat_joins_the_occurrence_queued_while_it_was_out(app, channels, clock):
    dead_run(clock, message="bad row 1")
    delivery_round.tick(clock)
    clock.advance(5)
    dead_run(clock, message="bad row 2")
    repeat = alert_rows("retry_limit_reached")[-1]
    claim = dispatch.claim_next(clock(), repeat.id)
    dead_run(clock, message="bad row 3")
    assert dispatch.deliver(claim, clock) == "held"
    _, repeat, queued = alert_rows("retry_limit_reached")
    assert (repeat.status, queued.status, queued.occurrences) == ("skipped", "pending", 2)
    clock.advance(295)
    assert delivery_round.tick(clock)["delivered"] == 1
    assert "2 more dead letters in this group (3 in all)" in channels.slack.requests[-1].json["text"]
    # The hold is not lateness: the row it folded into was sent unmarked, and the latency read 300 s (helper 153).
    timed = channel_report.latency(clock())
    assert (timed.count, timed.p95_s) == (1, 0.0)


def test_acknowledging_a_work_order_acknowledges_its_pagerduty_incident(app, channels, clock):
    """Its incident kept escalating while someone was already on it in Rebound (helper 154)."""
    run = dead_run(clock)
    delivery_round.tick(clock)
    order = db.session.get(WorkOrder, runs_letters(run.id)[0].work_order_id)
    changes.acknowledge(order, Actor("olga", None), clock)
    clock.advance(1)
    delivery_round.tick(clock)
    key = f"rebound-workorder-{order.id}"
    assert [(r.json["event_action"], r.json["dedup_key"]) for r in channels.pagerduty.requests] == [
        ("trigger", key), ("acknowledge", key)]
    assert [(r.json["action"], r.json["dedup_key"]) for r in channels.webhook.requests] == [
        ("trigger", key), ("acknowledge", key)]
    assert channels.webhook.requests[-1].json["title"] == f"Acknowledged: Work order #{order.id}: {order.title}"
    assert len(channels.slack.requests) == 1  # the alert; no chat note for an acknowledgement
    # A letter of its group dying since still reaches PagerDuty, on the same (acknowledged) incident.
    clock.advance(400)
    dead_run(clock, message="upstream 502 for order 4412")
    delivery_round.tick(clock)
    assert channels.pagerduty.requests[-1].json["event_action"] == "trigger"


def test_work_order_is_closed_once_its_replayed_run_succeeded_with_a_pagerduty_resolve(app, channels, clock):
    run = dead_run(clock, params={"fail_times": 1})
    [letter] = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)).scalars().all()
    order_id = letter.work_order_id
    delivery_round.tick(clock)
    assert db.session.get(WorkOrder, order_id).status == "open"
    clock.advance(60)
    control.replay(letter, ops, clock=clock)
    delivery_round.tick(clock)
    db.session.expire_all()
    assert db.session.get(WorkOrder, order_id).status == "open"  # replayed, not yet recovered
    clock.advance(5)
    assert execute(run.id, 0, clock=clock) == "succeeded"
    delivery_round.tick(clock)
    db.session.expire_all()
    order = db.session.get(WorkOrder, order_id)
    assert (order.status, order.closed_at, order.closed_by) == ("closed", clock(), "system")
    # What settled it, not a sentence naming every way one can (helper 108).
    assert order.close_note == "Every linked dead letter is settled (1): 1 replayed and succeeded."
    delivery_round.tick(clock)
    resolve = channels.pagerduty.requests[-1].json
    assert resolve == {"routing_key": ROUTING_KEY, "event_action": "resolve",
                       "dedup_key": f"rebound-workorder-{order_id}"}
    assert channels.slack.requests[-1].json["text"].startswith(f":white_check_mark: Resolved: Work order #{order_id}")


def test_a_replayed_run_that_dies_again_keeps_its_work_order_open(app, clock):
    only(app)
    run = dead_run(clock)
    [letter] = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)).scalars().all()
    control.replay(letter, ops, clock=clock)
    assert execute(run.id, 0, clock=clock) == "dead"
    delivery_round.tick(clock)
    db.session.expire_all()
    order = db.session.get(WorkOrder, letter.work_order_id)
    letters = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id).order_by(DeadLetter.id)
                                 ).scalars().all()
    assert [(x.status, x.work_order_id) for x in letters] == [("replayed", order.id), ("open", order.id)]
    assert (order.status, order.dead_letter_count) == ("open", 2)
    # A person gives up on it: discarding the newer letter settles the run, and the order closes.
    letters[1].status = "discarded"
    db.session.commit()
    delivery_round.tick(clock)
    db.session.expire_all()
    closed = db.session.get(WorkOrder, order.id)
    # It died again under this order's own error: said so, not handed to "another error's work order" (helper 160).
    assert (closed.status, closed.close_note) == ("closed", "Every linked dead letter is settled (2): 1 discarded; "
                                                  "1 replayed and died again under the same error, its newer letter "
                                                  "counted here.")


def test_a_replayed_run_that_dies_of_another_error_hands_over_to_that_errors_work_order(app, clock):
    only(app)
    run = dead_run(clock)
    [letter] = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)).scalars().all()
    db.session.execute(update(Run).where(Run.id == run.id).values(
        params={"fail_times": 9, "message": "card declined for order 4411", "code": "card_declined"}))
    db.session.commit()
    control.replay(letter, ops, clock=clock)
    assert execute(run.id, 0, clock=clock) == "dead"
    delivery_round.tick(clock)
    db.session.expire_all()
    [_, newer] = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id).order_by(DeadLetter.id)
                                    ).scalars().all()
    assert newer.work_order_id != letter.work_order_id and newer.status == "open"
    order = db.session.get(WorkOrder, letter.work_order_id)
    # Its note said the run "ended well" (helper 96): it died again, tracked by the other error's work order.
    assert order.status == "closed" and "died again under another error, which that error's work order tracks" in (
        order.close_note)
    assert db.session.get(WorkOrder, newer.work_order_id).status == "open"


def test_work_order_stays_open_while_one_of_its_dead_letters_is_open(app, channels, clock):
    first = dead_run(clock, message="row 1", params={"fail_times": 1})
    second = dead_run(clock, message="row 2", params={"fail_times": 1})
    letters = db.session.execute(select(DeadLetter).where(DeadLetter.run_id.in_((first.id, second.id)))
                                 .order_by(DeadLetter.id)).scalars().all()
    assert len({letter.work_order_id for letter in letters}) == 1
    control.replay(letters[0], ops, clock=clock)
    assert execute(first.id, 0, clock=clock) == "succeeded"
    delivery_round.tick(clock)
    assert db.session.get(WorkOrder, letters[0].work_order_id).status == "open"
    control.retry_now(db.session.get(Run, second.id), ops, clock=clock)
    assert execute(second.id, 0, clock=clock) == "succeeded"
    delivery_round.tick(clock)
    db.session.expire_all()
    assert db.session.get(WorkOrder, letters[0].work_order_id).status == "closed"


def test_discarded_dead_letters_close_their_work_order_on_the_next_tick(app, clock):
    only(app)
    run = dead_run(clock)
    [letter] = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)).scalars().all()
    letter.status = "discarded"
    db.session.commit()
    delivery_round.tick(clock)
    db.session.expire_all()
    assert db.session.get(WorkOrder, letter.work_order_id).status == "closed"
    [resolve] = messages("resolve")
    assert resolve.payload["incident_key"] == f"rebound-workorder-{letter.work_order_id}"


def test_claim_is_exclusive_so_two_deliverers_send_each_row_once(app, clock):
    with Receiver() as slack:
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH)
        for n in range(40):
            outbox.add("alert", f"breaker:h{n}", {"rule": "breaker_opened", "handler": f"h{n}", "open_s": 30},
                       clock())
        db.session.commit()
        outcomes, errors = [], []

        def deliverer():
            try:
                with app.app_context():
                    outcomes.append(dispatch.deliver_due(clock))
            except Exception as error:  # surfaced by the assertion below
                errors.append(error)

        threads = [threading.Thread(target=deliverer) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        handlers = sorted(r.json["text"].split("opened: ")[1].split(":")[0] for r in slack.requests)
        assert handlers == sorted(f"h{n}" for n in range(40))
        assert sum(sum(o.values()) for o in outcomes) == 40
        assert {m.status for m in messages()} == {"delivered"}
        sent = db.session.execute(select(Delivery.outbox_id)).scalars().all()
        assert len(sent) == len(set(sent)) == 40


def test_a_claimed_row_is_not_claimed_again_until_its_lease_runs_out(app, clock):
    outbox.add("alert", "breaker:x", {"rule": "breaker_opened", "handler": "x", "open_s": 30}, clock())
    db.session.commit()
    first = dispatch.claim_next(clock())
    assert first is not None and first.attempt == 1
    assert dispatch.claim_next(clock()) is None
    clock.advance(60 + 4 * 5 + 1)  # the deliverer died without a word
    second = dispatch.claim_next(clock())
    assert (second.message_id, second.attempt) == (first.message_id, 2)


def test_nothing_configured_records_messages_as_skipped(app, clock):
    only(app)
    dead_run(clock)
    assert delivery_round.tick(clock) == {"skipped": 2}
    assert {m.status for m in messages()} == {"skipped"}
    assert messages("workorder")[0].last_error == "no channel configured for it (workorder)"


def test_alert_latency_is_measured_from_dead_letter_to_delivery(app, channels, clock):
    start = clock()
    for delay in (1, 2, 3, 4, 30):
        dead_run(clock, message=f"distinct failure {delay}", code=f"code_{delay}")
        clock.advance(delay)
        delivery_round.tick(clock)
    latency = channel_report.latency(clock())
    assert (latency.count, latency.p50_s, latency.p95_s, latency.max_s) == (5, 3.0, 30.0, 30.0)
    assert channel_report.latency(start + timedelta(days=2)).count == 0


def test_alert_latency_ends_when_the_first_channel_took_the_alert(app, channels, clock):
    """An on-call walk: with the webhook down for minutes, alerts PagerDuty had paged in a second read as minutes
    late, since latency ran to the last channel's delivery."""
    channels.webhook.reply(500)
    dead_run(clock)
    clock.advance(1)
    delivery_round.tick(clock)  # Slack and PagerDuty take it; the webhook fails
    clock.advance(120)
    delivery_round.tick(clock)  # the webhook takes it on its second attempt
    [alert] = alert_rows("retry_limit_reached")
    assert (alert.delivered_at - alert.created_at).total_seconds() == 121
    assert channel_report.latency(clock()).p50_s == 1.0


def test_an_alert_a_channel_failed_for_good_is_timed_when_the_first_channel_took_it(app, channels, clock):
    """Latency counted only alerts every channel took: with the webhook down, the hours it was down, the very
    ones on-call and managers look back at, dropped out of the card and the reports."""
    channels.webhook.always(500)
    dead_run(clock)
    clock.advance(2)
    for _ in range(5):
        delivery_round.tick(clock)  # Slack and PagerDuty take it at once; the webhook fails five times
        clock.advance(60)
    [alert] = alert_rows("retry_limit_reached")
    assert (alert.status, alert.delivered_at) == ("failed", None)
    assert (alert.first_sent_at - alert.created_at).total_seconds() == 2
    latency = channel_report.latency(clock())
    assert (latency.count, latency.p50_s) == (1, 2.0)
    # The same rows Reports times (and the DLQ's "alerted" filter opens), in the hour a channel first took it.
    timed = db.session.execute(select(OutboxMessage.id).where(*channel_report.timed_alerts(
        alert.first_sent_at, alert.first_sent_at + timedelta(seconds=1)))).scalars().all()
    assert timed == [alert.id]


def test_test_alert_is_sent_at_once_and_audited(app, channels, clock):
    message, attempt = manual.send_test("pagerduty", ops, clock)
    assert (message.status, attempt.outcome, attempt.status_code) == ("delivered", "sent", 202)
    event = channels.pagerduty.requests[0].json
    assert event["payload"]["summary"].startswith("Test alert from Rebound: Sent by alice")
    assert event["payload"]["severity"] == "info"
    assert channels.slack.requests == []


def test_a_failed_test_alert_is_no_delivery_failure_and_is_not_sent_again(app, clock):
    with Receiver() as orders:
        orders.always(500)
        only(app, WORKORDER_URL=orders.url)
        message, attempt = manual.send_test("workorder", ops, clock)
    assert (message.status, attempt.outcome) == ("failed", "failed")
    assert channel_report.backlog(clock()).failed_24h == 0 and channel_report.recent_failures() == []
    assert alert_measures.workorder_failed(clock(), None).value == 0
    [state] = [state for state in channel_report.channels() if state.target.name == "workorder"]
    assert (state.last, state.last_sent, state.last_test.id) == (None, None, attempt.id)
    with pytest.raises(Conflict, match="test alert"):
        manual.redeliver(message.id, ops, clock=clock)


def test_a_failed_work_order_request_can_be_sent_again(app, clock):
    with Receiver() as orders:
        orders.always(500)
        only(app, WORKORDER_URL=orders.url)
        dead_run(clock)
        for _ in range(5):
            delivery_round.tick(clock)
            clock.advance(30)
        [request] = messages("workorder")
        assert request.status == "failed"
        orders.always(200, {"id": 777})
        manual.redeliver(request.id, ops, clock=clock)
        delivery_round.tick(clock)
        db.session.expire_all()
        assert db.session.get(OutboxMessage, request.id).status == "delivered"
        assert db.session.get(WorkOrder, request.payload["work_order_id"]).external_id == "777"


def fail_for_good(message_id: int, clock) -> OutboxMessage:
    """Tick through a message's five attempts at a failing channel; return it, failed."""
    for _ in range(5):
        delivery_round.tick(clock)
        clock.advance(30)
    db.session.expire_all()
    message = db.session.get(OutboxMessage, message_id)
    assert message.status == "failed"
    return message


LOST_REQUESTS = "rebound-delivery_failed:workorder:workorder"  # the incident of work-order requests lost


def lose_a_request(app, clock, orders, pagerduty) -> OutboxMessage:
    """Fail a work order's request for good, so PagerDuty is paged for it (its rule off); return the request."""
    orders.always(500)
    only(app, WORKORDER_URL=orders.url, PAGERDUTY_URL=pagerduty.url + "/v2/enqueue", PAGERDUTY_ROUTING_KEY=ROUTING_KEY)
    rule_pages_for_work_orders(False)
    dead_run(clock)
    request = fail_for_good(messages("workorder")[0].id, clock)
    delivery_round.tick(clock)
    assert last_page(pagerduty) == ("trigger", LOST_REQUESTS)
    return request


def last_page(pagerduty) -> tuple[str, str]:
    """PagerDuty's last event: its action and incident."""
    return pagerduty.requests[-1].json["event_action"], pagerduty.requests[-1].json["dedup_key"]


def test_the_delivery_failed_incident_is_resolved_once_the_lost_message_got_through(app, clock):
    with Receiver() as orders, Receiver() as pagerduty:
        request = lose_a_request(app, clock, orders, pagerduty)
        [failed] = alert_rows("delivery_failed")
        assert failed.status == "delivered"

        orders.always(200, {"id": 777})
        manual.redeliver(request.id, ops, clock=clock)
        delivery_round.tick(clock)  # the request gets through, and queues the resolve
        delivery_round.tick(clock)
        assert last_page(pagerduty) == ("resolve", LOST_REQUESTS)
        [resolve] = messages("resolve")
        assert resolve.status == "delivered" and resolve.payload["skip_channels"] == ["workorder"]
        # Another delivery of a re-sent message resolves nothing twice.
        dead_run(clock, code="other_code")
        orders.always(500)
        clock.advance(600)
        second = fail_for_good(messages("workorder")[-1].id, clock)
        orders.always(200, {"id": 778})
        manual.redeliver(second.id, ops, clock=clock)
        delivery_round.tick(clock)
        delivery_round.tick(clock)
        assert len(messages("resolve")) == 2  # the second loss was told (merged or new) and resolved in turn


def test_closing_a_work_order_retires_its_failed_request_and_resolves_the_incident_it_held_open(app, clock):
    """A closed order's failed request could not be sent again (it would open a ticket for work done), yet it still
    counted as lost: "Work order creation failed" stayed open for good, its Send again refused."""
    with Receiver() as orders, Receiver() as pagerduty:
        request = lose_a_request(app, clock, orders, pagerduty)
        order = db.session.get(WorkOrder, request.payload["work_order_id"])
        changes.close(order, "fixed by hand", Actor("olga"), clock)
        db.session.expire_all()
        retired = db.session.get(OutboxMessage, request.id)
        assert retired.status == "skipped" and retired.last_error.startswith(f"not sent: work order #{order.id} was "
                                                                              "closed at ")
        assert channel_report.recent_failures() == []  # no Send again left to refuse
        delivery_round.tick(clock)
        assert last_page(pagerduty) == ("resolve", LOST_REQUESTS)
        said = {m.dedup_key: m.payload["summary"] for m in messages("resolve")}
        assert said[f"resolve:{LOST_REQUESTS}"] == (  # it said "delivered to workorder"
            "Every one of the work order requests that could not be delivered to the work-order system has been sent "
            "again and delivered, or was for a work order closed since.")
        assert said[f"resolve:rebound-workorder-{order.id}"] == (
            f"Work order #{order.id} was closed by olga: fixed by hand.")  # the note ran into what followed


def test_an_automatic_close_tells_its_resolve_which_ticket_to_close_by_hand(app, channels, clock):
    run = dead_run(clock)
    letter = runs_letters(run.id)[0]
    db.session.execute(update(WorkOrder).where(WorkOrder.id == letter.work_order_id).values(external_id="EXT-6"))
    db.session.commit()
    db.session.execute(update(DeadLetter).where(DeadLetter.id == letter.id).values(status="discarded"))
    db.session.commit()
    assert changes.close_settled(clock) == [letter.work_order_id]
    [resolve] = messages("resolve")
    assert resolve.payload["summary"].endswith("Close ticket EXT-6 in the work-order system by hand: it is not told.")


def test_a_delivery_failed_alert_is_not_sent_once_its_message_was_re_sent_and_delivered(app, clock):
    with Receiver() as orders, Receiver() as slack:
        orders.always(500)
        slack.always(500)
        only(app, WORKORDER_URL=orders.url, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH)
        rule_pages_for_work_orders(False)
        dead_run(clock)
        request = fail_for_good(messages("workorder")[0].id, clock)
        # Retrying: Slack, its one channel, fails too (as it failed the dead letter's own alert).
        [failed] = [m for m in alert_rows("delivery_failed") if m.payload["failed_kind"] == "workorder"]
        assert (failed.status, failed.attempts) == ("pending", 1)
        told = len(slack.requests)
        orders.always(200, {"id": 777})
        manual.redeliver(request.id, ops, clock=clock)
        dispatch.deliver(dispatch.claim_next(clock(), message_id=request.id), clock)
        slack.always(200)
        clock.advance(60)
        delivery_round.tick(clock)
        db.session.expire_all()
        failed = db.session.get(OutboxMessage, failed.id)
        assert failed.status == "skipped" and len(slack.requests) == told
        assert failed.last_error == (f"not sent: every workorder message it tells of (#{request.id}, the last) was "
                                     "sent again and delivered first")


def test_a_delivery_failed_incident_waits_for_every_lost_message_and_a_re_sent_one_goes_now(app, clock):
    """An on-call walk: the resolve went out while a re-sent alert was still waiting, a held 'delivery failed' alert
    then opened the incident again for good, and "Send again" waited out the alerts' repeat window."""
    with Receiver() as slack, Receiver() as pagerduty:
        slack.always(500)
        pagerduty.always(202, {"status": "success"})
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH, PAGERDUTY_URL=pagerduty.url + "/v2/enqueue",
             PAGERDUTY_ROUTING_KEY=ROUTING_KEY)
        dead_run(clock, code="code_a")
        dead_run(clock, code="code_b")
        a, b = alert_rows("retry_limit_reached")
        fail_for_good(a.id, clock)
        fail_for_good(b.id, clock)
        [told] = alert_rows("delivery_failed")
        incident = "rebound-delivery_failed:alert:slack"
        assert told.status == "delivered" and told.occurrences == 2
        slack.always(200)
        # A new alert of b's group gets through: b's own would be a repeat within the alerts' repeat window.
        outbox.add("alert", b.dedup_key, dict(b.payload), clock())
        db.session.commit()
        assert delivery_round.tick(clock)["delivered"] == 1
        for lost in (a, b):
            manual.redeliver(lost.id, ops, clock=clock)
        dispatch.deliver(dispatch.claim_next(clock(), message_id=a.id), clock)
        assert messages("resolve") == []  # b was sent again but has not got through yet
        # A person's "Send again" goes at once, not held as a repeat; then the incident is resolved.
        assert delivery_round.tick(clock).get("held", 0) == 0
        db.session.expire_all()
        assert db.session.get(OutboxMessage, b.id).status == "delivered"
        assert [(r.json["event_action"], r.json["dedup_key"]) for r in pagerduty.requests][-1] == ("resolve", incident)


def test_completion_rate_counts_work_orders_closed_of_those_created(app, clock):
    only(app)
    runs = [dead_run(clock, message=f"m{n}", code=f"c{n}", params={"fail_times": 1}) for n in range(4)]
    letters = db.session.execute(select(DeadLetter).where(DeadLetter.run_id.in_([r.id for r in runs]))
                                 ).scalars().all()
    for letter in letters[:3]:
        control.replay(letter, ops, clock=clock)
        assert execute(letter.run_id, 0, clock=clock) == "succeeded"
    delivery_round.tick(clock)
    rate = workorders.completion(clock())
    assert (rate.created, rate.closed, rate.rate, rate.on_target) == (4, 3, 0.75, False)


def test_errors_and_logs_never_show_a_webhook_url_or_routing_key(app, clock, caplog):
    caplog.set_level(logging.INFO, logger="rebound.delivery")
    with Receiver() as slack, Receiver() as pagerduty:
        slack.always(404, {"error": f"no such hook {SLACK_PATH}"})
        pagerduty.always(400, {"message": f"bad key {ROUTING_KEY}"})
        only(app, SLACK_WEBHOOK_URL=slack.url + SLACK_PATH, PAGERDUTY_URL=pagerduty.url + "/v2/enqueue",
             PAGERDUTY_ROUTING_KEY=ROUTING_KEY)
        dead_run(clock)
        delivery_round.tick(clock)
    stored = " ".join(filter(None, [m.last_error for m in messages()] + db.session.execute(
        select(Delivery.error)).scalars().all()))
    assert "answered HTTP 404" in stored and "answered HTTP 400" in stored
    for text in (stored, caplog.text):
        assert SLACK_PATH not in text and ROUTING_KEY not in text and "SECRET" not in text
    assert "/…path" in caplog.text  # the masked target: host and last 4 only


BREAKER_POLICY = {"max_attempts": 5, "base_delay_s": 1, "jitter": 0,
                  "breaker": {"failure_threshold": 2, "open_s": 30, "success_threshold": 1}}


def breaker_attempt(clock, fail_times: int) -> str:
    """Submit a demo.flaky run under a breaker that opens after 2 failures, run its attempt here; return the outcome."""
    run, _ = submit(tenants.find("default"), Actor("test"), handler="demo.flaky", params={"fail_times": fail_times},
                    policy=BREAKER_POLICY, clock=clock)
    return execute(run.id, 0, clock=clock)


def test_a_breaker_that_closes_resolves_the_incident_its_opening_started(app, channels, clock):
    for _ in range(2):
        assert breaker_attempt(clock, 9) == "retry_wait"
    delivery_round.tick(clock)
    opened = channels.pagerduty.requests[-1].json
    assert (opened["event_action"], opened["dedup_key"]) == ("trigger", f"rebound-breaker:{HANDLER}")
    clock.advance(30)
    assert breaker_attempt(clock, 0) == "succeeded"
    delivery_round.tick(clock)
    closed = channels.pagerduty.requests[-1].json
    assert closed == {"routing_key": ROUTING_KEY, "event_action": "resolve", "dedup_key": f"rebound-breaker:{HANDLER}"}
    assert channels.slack.requests[-1].json["text"].startswith(
        f":white_check_mark: Resolved: Circuit breaker opened: {HANDLER}: {HANDLER} answers again")


def test_a_breakers_reopening_held_as_a_repeat_is_not_sent_after_a_reset_resolved_it(app, channels, clock):
    # The reopening went out minutes after the reset: PagerDuty paged for a closed breaker, never resolved (helper 108).
    for _ in range(2):
        breaker_attempt(clock, 9)
    delivery_round.tick(clock)
    clock.advance(30)
    assert breaker_attempt(clock, 9) == "retry_wait"  # the probe fails: open again
    assert delivery_round.tick(clock)["held"] == 1  # a repeat of the opening sent 30 s ago
    clock.advance(10)
    breaker_admin.reset(BreakerKey(HANDLER), ops, clock=clock)
    delivery_round.tick(clock)
    clock.advance(300)
    delivery_round.tick(clock)
    assert [r.json["event_action"] for r in channels.pagerduty.requests] == ["trigger", "resolve"]
    reopened = [m for m in messages("alert") if m.dedup_key.startswith("breaker:")][-1]
    assert reopened.status == "skipped" and "the circuit breaker closed at" in reopened.last_error
    clock.advance(60)  # it opens again after the reset: that is news, and goes
    for _ in range(2):
        breaker_attempt(clock, 9)
    delivery_round.tick(clock)
    assert [r.json["event_action"] for r in channels.pagerduty.requests] == ["trigger", "resolve", "trigger"]


def test_a_breaker_that_opens_again_after_it_closed_is_a_new_incident_told_at_once(app, channels, clock):
    # Its resolve has a key of its own, so the new opening was held 5 min as a "repeat" of the first.
    for _ in range(2):
        breaker_attempt(clock, 9)
    delivery_round.tick(clock)
    clock.advance(30)
    assert breaker_attempt(clock, 0) == "succeeded"  # it closes: the resolve goes
    delivery_round.tick(clock)
    clock.advance(10)
    for _ in range(2):
        breaker_attempt(clock, 9)
    assert delivery_round.tick(clock)["held"] == 0
    assert [r.json["event_action"] for r in channels.pagerduty.requests] == ["trigger", "resolve", "trigger"]


def test_an_alert_rule_firing_again_soon_after_its_resolve_is_told_at_once(app, channels, clock):
    # Its resolve shares the rule's key: the new trigger was held as a "repeat" of the resolve for 5 minutes, while
    # PagerDuty showed the incident resolved and the Overview the rule firing (helper 108).
    for minute in range(3):
        dead_run(clock, message=f"bad row {minute}")
    assert alert_rules.evaluate(clock)["retry_limit_reached"] == "firing"
    delivery_round.tick(clock)
    alert_rules.update_rule("retry_limit_reached", {"enabled": False}, ops, clock=clock)
    delivery_round.tick(clock)
    clock.advance(60)
    alert_rules.update_rule("retry_limit_reached", {"enabled": True}, ops, clock=clock)
    assert alert_rules.evaluate(clock)["retry_limit_reached"] == "firing"
    assert delivery_round.tick(clock)["held"] == 0
    rule_pages = [r.json["event_action"] for r in channels.pagerduty.requests
                  if r.json["dedup_key"] == "rebound-rule:retry_limit_reached"]
    assert rule_pages == ["trigger", "resolve", "trigger"]


def test_the_work_orders_completion_card_counts_what_reports_7_days_count(app, clock):
    """One order opened 7 × 24 h ago and some hours, before the first of the 7 UTC days: neither page counts it."""
    now = datetime(2026, 3, 9, 10, 0, tzinfo=UTC)
    tenant_id = tenants.find("default").id
    for opened, status in ((datetime(2026, 3, 2, 12, 0, tzinfo=UTC), "closed"),
                           (datetime(2026, 3, 3, 0, 0, tzinfo=UTC), "closed"), (now, "open")):
        db.session.add(WorkOrder(tenant_id=tenant_id, fingerprint=f"f{opened:%d%H}", title="t", status=status,
                                 created_at=opened, closed_at=now if status == "closed" else None))
    db.session.commit()
    card = workorders.completion(now)
    created, closed = report_figures.workorders(periods.preset("7d", now), Scope())
    assert (card.created, card.closed) == (created, closed) == (2, 1)


def runs_letters(run_id: int) -> list[DeadLetter]:
    db.session.expire_all()
    return db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)).scalars().all()
