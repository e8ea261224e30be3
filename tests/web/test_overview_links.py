"""The Overview leads somewhere: each dead-letter row opens the page behind it, and firing alerts reach every role."""

import html
import re
from datetime import timedelta

from sqlalchemy import insert, select, update

from console.domain.clock import utcnow
from console.extensions import db
from console.models import AlertRule, DeadLetter, Run, Tenant
from console.services.system import alert_rules
from console.web.overview.views import ALERT_LOOKS
from tests.factories import Runs


def _fire(key: str, detail: str) -> None:
    alert_rules.ensure_defaults()
    db.session.execute(update(AlertRule).where(AlertRule.key == key).values(state="firing", detail=detail))
    db.session.commit()


def test_dead_letter_rows_link_to_their_group_tenant_handler_and_run(client, auth, dead_run):
    run_id, letter_id = dead_run()
    letter = db.session.get(DeadLetter, letter_id)
    auth.as_role("viewer", "vic")
    page = html.unescape(client.get("/overview").get_data(as_text=True))
    assert f'href="/dlq/{letter_id}"' in page  # its address: the page of its group that holds it
    assert 'href="/dlq/?tenant=default"' in page
    assert 'href="/dlq/?task=handler:python:demo.flaky"' in page
    assert f'href="/runs/{run_id}">run {run_id}</a>' in page
    assert 'class="see-all" href="/dlq/">see all 1 →' in page
    # Beside the failed attempts, the runs retrying now: not every dead run ever (helper 110).
    assert re.search(r'class="see-all" href="/runs/?\?status=retry_wait"[^>]*>retrying now: 0 →', page)
    # The group link reproduces the filtered list the row stands for.
    listed = client.get(f"/dlq/?view=list&group={letter.fingerprint}").get_data(as_text=True)
    assert f'id="dl-{letter_id}"' in listed


def test_firing_alerts_show_to_every_role_read_only(client, auth):
    _fire("dlq_length", "140 dead letters are open")
    auth.as_role("viewer", "vic")
    page = client.get("/overview").get_data(as_text=True)
    assert "1 alert firing" in page and "Dead-letter queue long" in page and "140 dead letters are open" in page
    assert "/admin/alert-rules" not in page  # only admins are sent to the rules
    assert "Retry failure rate high" not in page  # not firing: not shown



def test_a_firing_alerts_figure_says_when_it_was_measured(client, auth):
    """It read 890 open beside a card of 19 for up to a minute after a mass replay, unexplained (helper 153)."""
    _fire("dlq_length", "890 dead letters are open")
    db.session.execute(update(AlertRule).where(AlertRule.key == "dlq_length").values(
        evaluated_at=utcnow() - timedelta(seconds=42)))
    db.session.commit()
    auth.as_role("viewer", "vic")
    page = client.get("/overview").get_data(as_text=True)
    assert re.search(r"890 dead letters are open \(measured <time [^>]*>4\d s ago</time>; rules are measured every "
                     r"minute\)", page), page[page.find("890"):page.find("890") + 300]


def test_each_firing_alert_leads_to_the_page_it_is_looked_into_on(client, auth):
    """They were plain text: the on-call guessed which counter was the next click (helper 142)."""
    assert set(ALERT_LOOKS) == set(alert_rules.RULES)  # a new rule says where it leads
    _fire("retry_limit_reached", "6 runs used up their retries")
    _fire("breaker_opened", "circuit breakers opened 5 times")
    _fire("timeout_anomaly", "12 timeouts in the window")
    auth.as_role("viewer", "vic")
    page = html.unescape(client.get("/overview").get_data(as_text=True))
    assert '<a href="/dlq/">dead letters →</a>' in page and '<a href="/breakers/">breakers →</a>' in page
    timeouts = re.search(r'<a href="([^"]+)">runs that timed out →</a>', page).group(1)
    assert "error_code=timeout" in timeouts and client.get(timeouts).status_code == 200


def test_a_tenant_limited_person_sees_which_alert_fires_but_not_other_tenants_counts(client, auth):
    _fire("dlq_length", "140 dead letters are open")
    acme = Tenant(name="acme")
    db.session.add(acme)
    db.session.commit()
    auth.make_user("tia", "operator", tenant=acme)
    auth.login("tia")
    page = client.get("/overview").get_data(as_text=True)
    assert "Dead-letter queue long" in page and "140 dead letters" not in page


def test_admins_get_a_link_to_the_rules(client, auth):
    _fire("breaker_opened", "circuit breakers opened 3 times")
    auth.as_role("admin", "ada")
    page = client.get("/overview").get_data(as_text=True)
    assert "Circuit breaker opened" in page and 'href="/admin/alert-rules"' in page


def test_no_panel_when_nothing_fires(client, auth):
    alert_rules.ensure_defaults()
    auth.as_role("viewer", "vic")
    assert "alert firing" not in client.get("/overview").get_data(as_text=True)


def test_the_run_success_card_says_what_it_counts_and_how_reports_differ(client, auth, dead_run):
    dead_run()
    auth.as_role("viewer", "vic")
    page = html.unescape(client.get("/overview").get_data(as_text=True))
    assert '<div class="label">Run success · 24 h</div><div class="value" data-counter="success_rate_24h">' in page
    assert "each run counted once as it ended. Reports' Execution success differs" in page


def test_sla_breaches_today_opens_todays_breaches_not_the_last_24_hours(client, auth, monkeypatch):
    from datetime import UTC, datetime

    monkeypatch.setattr("console.web.overview.views.utcnow", lambda: datetime(2026, 3, 2, 7, 30, tzinfo=UTC))
    auth.as_role("manager", "maria")
    page = html.unescape(client.get("/overview").get_data(as_text=True))
    assert 'href="/reports/breaches?from=2026-03-02&to=2026-03-02"' in page
    listed = client.get("/reports/breaches?from=2026-03-02&to=2026-03-02").get_data(as_text=True)
    assert "2026-03-02 00:00 – 2026-03-03 00:00 UTC" in listed


def test_run_success_counts_every_way_a_run_ends_and_opens_those_that_did_not_succeed(client, auth):
    runs, now = Runs(), utcnow()
    ended = {}
    # A run created two days ago that ended an hour ago is one of the last 24 h's: the counter reads finished_at.
    for status, created_h in (("succeeded", 1), ("succeeded", 48), ("dead", 1), ("failed", 1), ("compensated", 2),
                              ("compensation_failed", 1), ("resolved", 3)):
        run = runs.get(runs.submit())
        run.status, run.created_at, run.finished_at = status, now - timedelta(hours=created_h), now - timedelta(hours=1)
        db.session.commit()
        ended.setdefault(status, []).append(run.id)
    old = runs.get(runs.submit())
    old.status, old.finished_at = "dead", now - timedelta(hours=30)  # ended before the 24 h
    db.session.commit()
    auth.as_role("viewer", "vic")
    page = html.unescape(client.get("/overview").get_data(as_text=True))
    # failed, compensation_failed and resolved runs were left out of it: 2 of 4 read as 50 %.
    assert 'data-counter="success_rate_24h">28.6%' in page
    success = re.search(r'<a class="counter" href="([^"]+)"[^>]*><div class="label">Run success', page).group(1)
    listed = client.get(success).get_data(as_text=True)
    others = {run_id for status, ids in ended.items() if status != "succeeded" for run_id in ids}
    assert set(map(int, re.findall(r'<td class="num mono"><a href="/runs/(\d+)">', listed))) == others
    assert "Ended at or after" in listed
    succeeded = re.search(r'<a class="counter ok" href="([^"]+)"', page).group(1)
    listed = client.get(succeeded).get_data(as_text=True)
    assert set(map(int, re.findall(r'<td class="num mono"><a href="/runs/(\d+)">', listed))) == set(ended["succeeded"])


def test_an_operator_opens_sla_breaches_today_and_sees_no_manager_only_link(client, auth, monkeypatch):
    """Which runs were late is an operator's business: the counter opens the breaches list (its CSV too), without the
    manager's Figures."""
    from datetime import UTC, datetime

    monkeypatch.setattr("console.web.overview.views.utcnow", lambda: datetime(2026, 3, 2, 7, 30, tzinfo=UTC))
    auth.as_role("operator", "olga")
    page = html.unescape(client.get("/overview").get_data(as_text=True))
    assert '<a class="counter " href="/reports/breaches?from=2026-03-02&to=2026-03-02">' in page
    listed = client.get("/reports/breaches?from=2026-03-02&to=2026-03-02")
    assert listed.status_code == 200
    text = listed.get_data(as_text=True)
    assert "2026-03-02 00:00 – 2026-03-03 00:00 UTC" in text
    assert 'href="/reports?' not in text and "<h1>SLA breaches</h1>" in text
    assert client.get("/reports?period=24h").status_code == 403


def test_the_overview_says_when_no_scheduler_runs_and_stops_saying_it_once_one_leads(client, auth, app):
    from console.redis_conn import get_redis
    from console.services.system import leader

    _fire("dlq_length", "140 dead letters are open")
    auth.as_role("viewer", "vic")
    page = client.get("/overview").get_data(as_text=True)
    assert "<strong>No scheduler is running.</strong> Cron tasks do not fire" in page
    assert "the alerts below may be over" in page and 'href="/queues/"' in page
    lock = leader.LeaderLock(get_redis())
    assert lock.acquire_or_renew()
    try:
        assert "data-no-scheduler" not in client.get("/overview").get_data(as_text=True)
    finally:
        lock.release()


def test_the_failures_chart_is_said_in_words_for_a_reader_who_cannot_see_it(client, auth, dead_run, clock):
    auth.as_role("viewer", "vic")
    quiet = client.get("/overview").get_data(as_text=True)
    assert '<p class="subtle chart-note" data-said>No failed attempts in the last hour.</p>' in quiet
    clock.set(utcnow() - timedelta(minutes=5))  # the chart reads the last hour of the real time
    dead_run()
    said = re.search(r"data-said>([^<]+)<", client.get("/overview").get_data(as_text=True)).group(1)
    assert re.fullmatch(r"1 failed attempt in the last hour \(1 dead-lettered\); the most in one minute, 1, at "
                        r"\d\d:\d\d UTC\.", said), said


def test_the_counters_read_with_their_thousands_as_the_dlq_says_them(client, auth):
    # "DEAD LETTERS OPEN 19990" beside the DLQ's "19,990" (helper 112).
    default = db.session.execute(select(Tenant).where(Tenant.name == "default")).scalar_one()
    now = utcnow()
    db.session.execute(insert(Run), [{
        "tenant_id": default.id, "handler": "python:demo.noop", "params": {}, "policy_overrides": {},
        "idempotency_key": f"many-{n}", "status": "pending", "attempt": 0, "series": 1, "executions": 0,
        "progress": 0, "source": "api", "cancel_requested": False, "created_at": now, "updated_at": now}
        for n in range(1234)])
    db.session.commit()
    auth.as_role("viewer")
    assert 'data-counter="pending">1,234<' in client.get("/overview").get_data(as_text=True)
