"""Alert rules: each fires past its threshold and clears below it; thresholds are edited by admins, audited."""

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from console.domain.clock import utcnow
from console.extensions import db
from console.models import AlertRule, AuditEntry, DeadLetter, OutboxMessage, Run, Tenant
from console.scheduler.task_jobs import TaskJobs
from console.services.actor import Actor
from console.services.delivery import dispatch, outbox
from console.services.engine import control
from console.services.engine.execute import execute
from console.services.errors import QueueFull
from console.services.people import tenants
from console.services.scheduling import planner, sla, tasks
from console.services.system import alert_measures, alert_rules
from tests.factories import Runs, bearer
from tests.helpers import csrf_from
from tests.receiver import Receiver

NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 60}
ADMIN = Actor("test-admin")
SCHEDULER = Actor("scheduler")


@pytest.fixture
def runs(app):
    return Runs()


def rule(key: str) -> AlertRule:
    db.session.expire_all()
    return db.session.execute(select(AlertRule).where(AlertRule.key == key)).scalar_one()


def messages(key: str) -> list[OutboxMessage]:
    db.session.expire_all()
    return db.session.execute(select(OutboxMessage).where(OutboxMessage.dedup_key == f"rule:{key}")
                              .order_by(OutboxMessage.id)).scalars().all()


def deliver(key: str) -> None:
    """Mark the rule's messages delivered, as the delivery worker would."""
    db.session.execute(update(OutboxMessage).where(OutboxMessage.dedup_key == f"rule:{key}")
                       .values(status="delivered"))
    db.session.commit()


def assert_fires(key: str, clock, value: float) -> OutboxMessage:
    assert alert_rules.evaluate(clock) == {key: "firing"}
    row = rule(key)
    assert (row.state, row.changed_at, row.evaluated_at) == ("firing", clock(), clock())
    assert row.last_value == pytest.approx(value)
    assert row.detail == alert_rules.RULES[key].measure(clock(), row.window_s).detail  # what was counted, in words
    alert = messages(key)[-1]
    assert (alert.kind, alert.status, alert.payload["state"]) == ("alert", "pending", "firing")
    assert alert.payload["rule"] == key and alert.payload["value"] == pytest.approx(value)
    assert alert.payload["title"] == alert_rules.RULES[key].title and alert.payload["summary"]
    assert alert_rules.evaluate(clock) == {}  # still firing: no second alert
    assert len(messages(key)) == len([m for m in messages(key) if m.id <= alert.id])
    deliver(key)
    return alert


def assert_clears(key: str, clock) -> OutboxMessage:
    assert alert_rules.evaluate(clock) == {key: "ok"}
    assert rule(key).state == "ok"
    resolve = messages(key)[-1]
    assert (resolve.kind, resolve.payload["state"], resolve.payload["severity"]) == ("resolve", "resolved", "info")
    assert resolve.payload["title"].startswith("Resolved: ")
    assert alert_rules.evaluate(clock) == {}
    return resolve


def test_the_default_rules_are_seeded_once(app):
    alert_rules.ensure_defaults()
    alert_rules.ensure_defaults()
    rows = alert_rules.all_rules()
    assert [r.key for r in rows] == list(alert_rules.RULES) == [
        "retry_failure_rate", "dlq_length", "queue_wait", "scheduling_failure_rate", "sla_consecutive_breaches",
        "queue_overflow", "retry_limit_reached", "workorder_failed", "breaker_opened", "lock_contention",
        "progress_write_failure_rate", "timeout_anomaly"]
    assert {(r.state, r.enabled) for r in rows} == {("ok", True)}
    assert {r.key: (r.threshold, r.window_s) for r in rows}["retry_failure_rate"] == (0.15, 600)
    assert rule("dlq_length").threshold == 100 and rule("dlq_length").window_s is None
    assert rule("scheduling_failure_rate").threshold == 0.05 and rule("scheduling_failure_rate").window_s == 300


def test_alert_rules_run_every_minute_under_a_stable_id():
    from console.services.system.maintenance import MAINTENANCE

    [job] = [job for job in MAINTENANCE if job.id == "alert-rules"]
    assert (job.func, job.seconds) == ("console.services.system.alert_rules:evaluate", 60)


def test_retry_failure_rate_fires_over_15_percent_of_ten_or_more_attempts_and_clears(runs, clock):
    for _ in range(7):
        assert execute(runs.submit("demo.noop"), 0, clock=clock) == "succeeded"
    for _ in range(2):
        assert execute(runs.submit("demo.flaky", {"fail_times": 9}, policy=NO_JITTER), 0, clock=clock) == "retry_wait"
    assert alert_rules.evaluate(clock) == {}  # 2 of 9 is 22%, but nine attempts are too few to page anyone
    row = rule("retry_failure_rate")
    assert row.last_value is None and row.detail == "2 of 9 attempts failed: too few to judge (a rate needs 10)"
    assert execute(runs.submit("demo.noop"), 0, clock=clock) == "succeeded"
    alert = assert_fires("retry_failure_rate", clock, 0.2)
    assert alert.payload["summary"] == ("2 of 10 attempts failed in the last 10 min (20%; threshold 15%).")
    clock.advance(11 * 60)  # the failures leave the ten-minute window, and nothing ran since (every worker down?)
    assert alert_rules.evaluate(clock) == {} and rule("retry_failure_rate").state == "firing"
    assert rule("retry_failure_rate").detail == ("0 of 0 attempts failed: too few to judge (a rate needs 10); it "
                                                 "stays firing until there are")
    for _ in range(10):
        assert execute(runs.submit("demo.noop"), 0, clock=clock) == "succeeded"
    assert_clears("retry_failure_rate", clock)


def test_dlq_length_fires_over_its_threshold_and_clears_when_dead_letters_are_handled(runs, clock):
    alert_rules.update_rule("dlq_length", {"threshold": 2}, ADMIN)
    for _ in range(3):
        assert execute(runs.submit("demo.flaky", {"error": "fatal"}), 0, clock=clock) == "dead"
    assert_fires("dlq_length", clock, 3)
    db.session.execute(update(DeadLetter).where(DeadLetter.id == 1).values(status="resolved"))
    db.session.commit()
    assert_clears("dlq_length", clock)


def test_a_rule_firing_before_any_channel_was_set_up_is_told_once_one_is(app, runs, clock):
    """It was skipped for want of a channel and stayed silent until it cleared and fired again (helper 154)."""
    app.config.update(SLACK_WEBHOOK_URL="", PAGERDUTY_ROUTING_KEY="", ALERT_WEBHOOK_URL="", WORKORDER_URL="")
    alert_rules.update_rule("dlq_length", {"threshold": 2}, ADMIN)
    for _ in range(3):
        assert execute(runs.submit("demo.flaky", {"error": "fatal"}), 0, clock=clock) == "dead"
    assert alert_rules.evaluate(clock) == {"dlq_length": "firing"}
    fired = messages("dlq_length")[-1]
    assert dispatch.deliver(dispatch.claim_next(clock(), fired.id), clock) == "skipped"
    clock.advance(60)
    alert_rules.evaluate(clock)
    assert [m.id for m in messages("dlq_length")] == [fired.id]  # still no channel: nothing new
    with Receiver() as hook:
        app.config.update(ALERT_WEBHOOK_URL=hook.url)
        clock.advance(60)
        assert alert_rules.evaluate(clock) == {}  # not a new firing
        _, told = messages("dlq_length")
        assert (told.kind, told.status) == ("alert", "pending")
        assert told.payload["summary"].endswith(f"Firing since {fired.created_at:%Y-%m-%d %H:%M} UTC; told now, as no "
                                                "channel was configured then.")
        assert dispatch.deliver(dispatch.claim_next(clock(), told.id), clock) == "delivered"
        assert [r.json["event"] for r in hook.requests] == ["dlq_length"]
        clock.advance(60)
        alert_rules.evaluate(clock)
        assert len(messages("dlq_length")) == 2  # told once


def test_queue_wait_fires_when_a_wanted_job_waits_past_five_minutes_and_clears_once_none_does(runs, clock):
    run_id = runs.submit("demo.noop")  # no worker takes it: every one stopped, frozen or busy
    clock.set(utcnow())  # a moment after it was queued
    assert alert_rules.evaluate(clock) == {}
    clock.advance(301)
    alert = assert_fires("queue_wait", clock, 301)
    assert alert.payload["summary"] == ("the oldest job in default has waited 5 min 1 s; 0 workers registered "
                                        "(5 min 1 s; threshold 5 min).")
    assert alert.payload["severity"] == "critical"
    execute(run_id, 0, clock=clock)  # its run ended meanwhile (cancelled, or run elsewhere): the job is not wanted
    assert_clears("queue_wait", clock)
    assert rule("queue_wait").detail == "no job waits in a queue; 0 workers registered"


def test_queue_wait_finds_a_wanted_job_behind_hundreds_of_jobs_whose_runs_ended(runs, clock, monkeypatch):
    """An on-call walk: the rule read the first 100 jobs only, so a mass cancel ahead of a waiting run hid it."""
    monkeypatch.setattr(alert_measures, "QUEUE_SCAN", 20)  # pages of 20, so 45 ended jobs span three of them
    for _ in range(45):
        control.cancel(db.session.get(Run, runs.submit("demo.noop")), Actor("olga"), clock=clock)
    runs.submit("demo.noop")
    clock.set(utcnow())
    clock.advance(301)
    assert_fires("queue_wait", clock, 301)


def test_scheduling_failure_rate_counts_late_starts_and_missed_firings(app, runs, clock):
    task = tasks.register(tenants.find("default"), {"name": "yearly", "handler": "demo.noop", "cron": "0 0 1 1 *"},
                          SCHEDULER)
    firings = [planner.Firing(task.id, clock() - timedelta(seconds=n)) for n in range(10)]
    fired = [outcome.run_id for outcome in planner.fire(firings, SCHEDULER, clock)]
    for run_id in fired[:9]:
        execute(run_id, 0, clock=clock)
    clock.advance(61)  # the tenth starts over a minute late
    execute(fired[9], 0, clock=clock)
    assert_fires("scheduling_failure_rate", clock, 0.1)
    clock.advance(10 * 60)
    on_time = planner.fire([planner.Firing(task.id, clock() - timedelta(seconds=n)) for n in range(10, 20)],
                           SCHEDULER, clock)
    for outcome in on_time:  # too few to judge would keep it firing: ten that started on time clear it
        execute(outcome.run_id, 0, clock=clock)
    assert_clears("scheduling_failure_rate", clock)
    clock.advance(10 * 60)
    # A scheduler that was down misses firings: they count as failed ones.
    every_minute = tasks.register(tenants.find("default"), {"name": "minutely", "handler": "demo.noop",
                                                            "cron": "* * * * *", "misfire_grace_s": 0}, SCHEDULER)
    every_minute.created_at = clock() - timedelta(minutes=12)
    db.session.commit()
    assert TaskJobs(app, None, None, clock).catch_up()[1] >= 10
    assert_fires("scheduling_failure_rate", clock, 1.0)


def test_sla_rule_fires_when_a_task_breaches_three_runs_in_a_row(runs, clock):
    task = tasks.register(tenants.find("default"), {"name": "hourly", "handler": "demo.noop", "cron": "0 * * * *",
                                                    "sla": {"max_start_delay_s": 60}}, SCHEDULER)
    for _ in range(6):  # late on and on, it escalates at the third run and again at the sixth: still one task
        [fired] = planner.fire([planner.Firing(task.id, clock())], SCHEDULER, clock)
        clock.advance(300)
        execute(fired.run_id, 0, clock=clock)
        sla.check(clock)
        if _ < 2:
            assert alert_rules.evaluate(clock) == {}  # one or two breaches do not escalate
    assert len(runs.outbox("escalation")) == 2
    assert_fires("sla_consecutive_breaches", clock, 1)  # it said "2 tasks"
    assert rule("sla_consecutive_breaches").detail == "1 task breached its SLA three runs in a row"
    clock.advance(3601)
    assert_clears("sla_consecutive_breaches", clock)


def test_queue_overflow_fires_on_a_refused_submission(runs, clock):
    runs.submit("demo.noop", policy={"queue_limit": 1}, clock=clock)
    with pytest.raises(QueueFull):
        runs.submit("demo.noop", policy={"queue_limit": 1}, clock=clock)
    assert_fires("queue_overflow", clock, 1)
    clock.advance(301)
    assert_clears("queue_overflow", clock)


def test_retry_limit_reached_fires_and_clears_once_the_dead_letter_is_handled(runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 9}, policy={**NO_JITTER, "max_attempts": 1})
    assert execute(run_id, 0, clock=clock) == "dead"
    alert = assert_fires("retry_limit_reached", clock, 1)
    assert alert.payload["severity"] == "error"
    db.session.execute(update(DeadLetter).values(status="replayed"))
    db.session.commit()
    assert_clears("retry_limit_reached", clock)


def test_a_count_of_one_is_said_in_the_singular(runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 9}, policy={**NO_JITTER, "max_attempts": 1})
    assert execute(run_id, 0, clock=clock) == "dead"
    assert alert_measures.retry_limit_reached(clock(), 3600).detail == (
        "1 run used up its retries and waits in the dead-letter queue")
    assert alert_measures.dlq_length(clock(), None).detail == "1 dead letter is open"
    assert alert_measures.retry_failure_rate(clock(), 600).detail == "1 of 1 attempt failed"
    assert execute(runs.submit("demo.flaky", {"fail_times": 9}, policy={**NO_JITTER, "max_attempts": 1}), 0,
                   clock=clock) == "dead"
    assert alert_measures.retry_limit_reached(clock(), 3600).detail == (
        "2 runs used up their retries and wait in the dead-letter queue")


def test_work_order_creation_failed_fires_until_the_work_order_is_sent(app, clock):
    message = outbox.add("workorder", "workorder:1", {"work_order_id": 1}, clock())
    db.session.commit()
    message.status = "failed"
    db.session.commit()
    assert_fires("workorder_failed", clock, 1)
    message.status = "delivered"  # someone fixed the channel and sent it again
    db.session.commit()
    assert_clears("workorder_failed", clock)


def test_breaker_opened_fires_when_a_breaker_opens(runs, clock):
    policy = {**NO_JITTER, "breaker": {"failure_threshold": 2, "open_s": 30, "success_threshold": 1}}
    for _ in range(2):
        execute(runs.submit("demo.flaky", {"fail_times": 9}, policy=policy), 0, clock=clock)
    assert [m.payload["rule"] for m in runs.outbox("alert")] == ["breaker_opened"]
    alert = assert_fires("breaker_opened", clock, 1)
    # The breaker's own alert pages (and its closing resolves that incident): the rule says it again, never paging.
    assert dispatch.route(alert) == ["slack", "webhook"]
    clock.advance(601)
    assert dispatch.route(assert_clears("breaker_opened", clock)) == ["slack", "webhook"]  # where it was raised


def test_a_flap_before_delivery_leaves_one_message_in_the_latest_state(runs, clock):
    alert_rules.update_rule("dlq_length", {"threshold": 0}, ADMIN)
    assert execute(runs.submit("demo.flaky", {"error": "fatal"}), 0, clock=clock) == "dead"
    assert alert_rules.evaluate(clock) == {"dlq_length": "firing"}
    db.session.execute(update(DeadLetter).values(status="discarded"))
    db.session.commit()
    assert alert_rules.evaluate(clock) == {"dlq_length": "ok"}
    [message] = messages("dlq_length")  # not sent yet, so the trigger became the resolve
    assert (message.kind, message.payload["state"], message.occurrences) == ("resolve", "resolved", 2)


def test_a_disabled_rule_is_not_watched_and_disabling_a_firing_rule_resolves_it(runs, clock):
    alert_rules.update_rule("dlq_length", {"threshold": 0}, ADMIN)
    assert execute(runs.submit("demo.flaky", {"error": "fatal"}), 0, clock=clock) == "dead"
    assert_fires("dlq_length", clock, 1)
    alert_rules.update_rule("dlq_length", {"enabled": False}, ADMIN)
    row = rule("dlq_length")
    assert (row.state, row.enabled, row.last_value) == ("ok", False, None)
    assert messages("dlq_length")[-1].kind == "resolve"
    assert alert_rules.evaluate(clock) == {}
    assert rule("dlq_length").state == "ok"
    # Switched on again, it is not yet measured, not "— / None · 39 s ago" as of its last measure before.
    alert_rules.update_rule("dlq_length", {"enabled": True}, ADMIN)
    assert (rule("dlq_length").evaluated_at, rule("dlq_length").detail) == (None, None)


# The API and the page.


def audit_rows(key: str) -> list[AuditEntry]:
    db.session.expire_all()
    return db.session.execute(select(AuditEntry).where(AuditEntry.action == "alert_rule.update",
                                                       AuditEntry.target_id == key)).scalars().all()


def test_the_api_lists_the_rules_and_admins_change_them_audited(client, auth):
    admin = bearer(auth.make_user("root", "admin"))
    listed = client.get("/internal/alert-rules", headers=bearer(auth.make_user("eve", "viewer")))
    assert listed.status_code == 200
    assert [r["key"] for r in listed.json] == list(alert_rules.RULES)
    first = listed.json[0]
    assert first | {"changed_at": None} == {
        "key": "retry_failure_rate", "title": "Retry failure rate high", "description": first["description"],
        "unit": "rate", "threshold": 0.15, "window_s": 600, "windowed": True, "enabled": True, "state": "ok",
        "last_value": None, "detail": None, "changed_at": None, "evaluated_at": None}
    changed = client.put("/internal/alert-rules/retry_failure_rate", headers=admin,
                         json={"threshold": 0.25, "window_s": 900, "enabled": True})
    assert changed.status_code == 200, changed.json
    assert (changed.json["threshold"], changed.json["window_s"]) == (0.25, 900)
    assert (rule("retry_failure_rate").threshold, rule("retry_failure_rate").window_s) == (0.25, 900)
    [entry] = audit_rows("retry_failure_rate")
    assert entry.before == {"threshold": 0.15, "window_s": 600} and entry.after == {"threshold": 0.25, "window_s": 900}
    assert entry.actor.startswith("root (token rb_")
    # Sending the same values again changes nothing and audits nothing.
    again = client.put("/internal/alert-rules/retry_failure_rate", headers=admin, json={"threshold": 0.25})
    assert again.status_code == 200
    assert len(audit_rows("retry_failure_rate")) == 1


@pytest.mark.parametrize(("key", "body", "field"), [
    ("retry_failure_rate", {"threshold": "high"}, "threshold"),
    ("retry_failure_rate", {"threshold": 15}, "threshold"),  # a rate is a fraction
    ("retry_failure_rate", {"threshold": -1}, "threshold"),
    ("dlq_length", {"threshold": 2.5}, "threshold"),
    ("dlq_length", {"threshold": 99999999999999999999}, "threshold"),  # a float would keep 1e20, not what was typed
    ("dlq_length", {"threshold": 1e30}, "threshold"),
    ("dlq_length", {"threshold": 10 ** 400}, "threshold"),  # too large for a float: math.isfinite() raised, a 500
    ("retry_failure_rate", {"threshold": 10 ** 400}, "threshold"),
    ("timeout_anomaly", {"threshold": 1e-300}, "threshold"),  # under 1× the usual count it fires on fewer
    ("timeout_anomaly", {"threshold": 0.5}, "threshold"),
    ("retry_failure_rate", {"window_s": 10}, "window_s"),
    ("retry_failure_rate", {"window_s": "600"}, "window_s"),
    ("dlq_length", {"window_s": 600}, "window_s"),  # it has no window
    ("breaker_opened", {"enabled": "yes"}, "enabled"),
    ("breaker_opened", {"severity": "low"}, "severity"),
])
def test_bad_values_are_a_422_naming_the_field_and_change_nothing(client, auth, key, body, field):
    response = client.put(f"/internal/alert-rules/{key}", headers=bearer(auth.make_user("root", "admin")), json=body)
    assert response.status_code == 422, response.json
    assert response.json["field"] == field and response.json["detail"]
    assert audit_rows(key) == [] and rule(key).threshold == alert_rules.RULES[key].threshold


def test_only_admins_change_rules_and_tenant_tokens_cannot_read_them(client, auth):
    operator = bearer(auth.make_user("op", "operator"))
    assert client.put("/internal/alert-rules/dlq_length", headers=operator, json={"threshold": 5}).status_code == 403
    assert client.put("/internal/alert-rules/nope", headers=bearer(auth.make_user("root", "admin")),
                      json={"threshold": 5}).status_code == 404
    acme = Tenant(name="acme")
    db.session.add(acme)
    db.session.commit()
    scoped = client.get("/internal/alert-rules", headers=bearer(auth.make_user("acme-bot", "viewer"), acme))
    assert scoped.status_code == 403
    assert client.get("/internal/alert-rules").status_code == 401
    assert rule("dlq_length").threshold == 100


def test_the_admin_page_shows_each_rule_and_saves_a_threshold_audited(client, auth, runs, clock):
    alert_rules.update_rule("dlq_length", {"threshold": 0}, ADMIN)
    execute(runs.submit("demo.flaky", {"error": "fatal"}), 0, clock=clock)
    alert_rules.evaluate(clock)
    auth.as_role("admin")
    page = client.get("/admin/alert-rules")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "Alert rules</a>" in html and "1 firing" in html
    for spec in alert_rules.RULES.values():
        assert f'id="rule-{spec.key}"' in html and spec.title in html
    row_id = rule("retry_failure_rate").id
    token = csrf_from(html)
    saved = client.post("/admin/alert-rules/retry_failure_rate", data={
        "csrf_token": token, f"r{row_id}-threshold": "20", f"r{row_id}-window_s": "1200", f"r{row_id}-enabled": "1"})
    assert saved.status_code == 303 and saved.headers["Location"].endswith("/admin/alert-rules")
    assert (rule("retry_failure_rate").threshold, rule("retry_failure_rate").window_s) == (0.2, 1200)
    assert audit_rows("retry_failure_rate")[0].after == {"threshold": 0.2, "window_s": 1200}
    # htmx swaps the row, with the saved values and a confirmation.
    dlq_id = rule("dlq_length").id
    fragment = client.post("/admin/alert-rules/dlq_length", headers={"HX-Request": "true"}, data={
        "csrf_token": token, f"r{dlq_id}-threshold": "50", f"r{dlq_id}-enabled": "0"})
    body = fragment.get_data(as_text=True)
    assert fragment.status_code == 200 and body.lstrip().startswith('<tr id="rule-dlq_length"')
    assert "saved" in body and 'value="50"' in body and ">off<" in body
    assert fragment.headers["HX-Trigger"] == "rules-changed"  # the "n firing" summary refreshes
    assert (rule("dlq_length").threshold, rule("dlq_length").enabled, rule("dlq_length").state) == (50, False, "ok")
    assert messages("dlq_length")[-1].kind == "resolve"
    # A count reads with its thousands: a threshold of a billion read "1e+09" (helper 108).
    assert [alert_rules.RULES["dlq_length"].show(value) for value in (1e9, 90, 2.5)] == ["1,000,000,000", "90", "2.5"]


def test_a_bad_value_on_the_page_is_a_422_with_the_reason(client, auth):
    auth.as_role("admin")
    token = auth.csrf("/admin/alert-rules")
    row_id = rule("retry_failure_rate").id
    for typed in ("150", "1e309", "-1"):  # the form is in percent: it says so, not the API's fraction
        response = client.post("/admin/alert-rules/retry_failure_rate", data={
            "csrf_token": token, f"r{row_id}-threshold": typed, f"r{row_id}-window_s": "600",
            f"r{row_id}-enabled": "1"})
        text = response.get_data(as_text=True)
        assert response.status_code == 422 and "a percentage from 0 to 100, e.g. 15 for 15 %" in text, typed
        assert "is a fraction" not in text
    response = client.post("/admin/alert-rules/retry_failure_rate", headers={"HX-Request": "true"}, data={
        "csrf_token": token, f"r{row_id}-threshold": "many", f"r{row_id}-window_s": "600", f"r{row_id}-enabled": "1"})
    assert response.status_code == 422 and "Threshold" in response.get_data(as_text=True)
    # The service's refusals read as the form's own: its label, not the API's field name.
    short = client.post("/admin/alert-rules/retry_failure_rate", data={
        "csrf_token": token, f"r{row_id}-threshold": "15", f"r{row_id}-window_s": "5", f"r{row_id}-enabled": "1"})
    assert short.status_code == 422 and "Window, seconds: a whole number of seconds from 60 to 86400" in short.get_data(
        as_text=True)
    count_row = rule("dlq_length").id
    halves = client.post("/admin/alert-rules/dlq_length", data={
        "csrf_token": token, f"r{count_row}-threshold": "2.5", f"r{count_row}-enabled": "1"})
    assert halves.status_code == 422 and "Threshold: a whole number for a count" in halves.get_data(as_text=True)
    # Other scripts' digits and underscores, which Python's int() reads: an on-call walk saved ٣٠٠ as a 300 s window.
    for window in ("٣٠٠", "3_00", "３００"):
        odd = client.post("/admin/alert-rules/retry_failure_rate", data={
            "csrf_token": token, f"r{row_id}-threshold": "15", f"r{row_id}-window_s": window,
            f"r{row_id}-enabled": "1"})
        assert odd.status_code == 422 and "a whole number of seconds, e.g. 300" in odd.get_data(as_text=True), window
    assert rule("retry_failure_rate").threshold == 0.15 and rule("retry_failure_rate").window_s == 600
    assert audit_rows("retry_failure_rate") == []


def test_viewers_get_403_on_the_page_and_its_form(client, auth):
    auth.as_role("viewer")
    token = auth.csrf("/overview")
    assert client.get("/admin/alert-rules").status_code == 403
    row_id = rule("dlq_length").id
    refused = client.post("/admin/alert-rules/dlq_length", data={
        "csrf_token": token, f"r{row_id}-threshold": "1", f"r{row_id}-enabled": "1"})
    assert refused.status_code == 403 and rule("dlq_length").threshold == 100
