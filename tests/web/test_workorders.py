"""The Work orders page: list, detail, acknowledge / assign / close with audit, viewers, tenants."""

import re
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import AuditEntry, DeadLetter, OutboxMessage, Tenant, WorkOrder
from console.services.actor import Actor
from console.services.dlq import discards
from console.services.engine.execute import execute
from console.services.system import delivery_round
from console.services.workorders import changes
from tests.factories import Runs
from tests.helpers import assert_marked
from tests.receiver import Receiver

FATAL = {"fail_times": 9, "error": "fatal", "code": "invalid_account", "message": "account 1000 is closed"}
HX = {"HX-Request": "true"}


@pytest.fixture
def runs(app):
    return Runs()


@pytest.fixture
def clock():
    """A movable clock starting now, so the page's "last 7 days" and "last 24 h" windows see what tests make."""
    return FrozenClock(utcnow())


def dead(runs, clock, tenant="default", **params) -> DeadLetter:
    run_id = runs.submit("demo.flaky", {**FATAL, **params}, tenant=tenant, clock=clock)
    assert execute(run_id, 0, clock=clock) == "dead"
    [letter] = runs.dead_letters(run_id)
    return letter


def order(order_id: int) -> WorkOrder:
    db.session.expire_all()
    return db.session.get(WorkOrder, order_id)


def audit_rows(action: str, order_id: int) -> list[AuditEntry]:
    db.session.expire_all()
    mine = select(AuditEntry).where(AuditEntry.action == action, AuditEntry.target_id == str(order_id))
    return db.session.execute(mine.order_by(AuditEntry.seq)).scalars().all()


def post(client, auth, path: str, data: dict | None = None, headers: dict | None = None):
    return client.post(path, data={"csrf_token": auth.csrf("/workorders"), **(data or {})}, headers=headers or {})


def test_list_shows_each_work_order_with_its_count_external_id_and_delivery(app, client, auth, runs, clock):
    with Receiver() as tickets, Receiver() as slack:
        tickets.always(201, {"id": "OPS-77"})
        app.config.update(WORKORDER_URL=tickets.url, SLACK_WEBHOOK_URL=slack.url + "/hook")
        first = dead(runs, clock, message="account 1000 is closed")
        dead(runs, clock, message="account 2000 is closed")  # the same error group
        other = dead(runs, clock, code="bad_iban", message="IBAN checksum failed")
        delivery_round.tick(clock)
    auth.as_role("viewer")
    page = client.get("/workorders")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    row = re.search(rf'<tr id="wo-row-{first.work_order_id}">(.*?)</tr>', html, re.S).group(1)
    # The group's words, not one letter's ids and addresses (helper 164).
    assert "python:demo.flaky: invalid_account — account &lt;n&gt; is closed" in row
    assert re.search(r'<td class="num">2 <span class="subtle">open of 2</span></td>', row)
    assert "OPS-77" in row and ">sent</span>" in row
    assert f'id="wo-row-{other.work_order_id}"' in html
    counters = re.search(r'<div class="grid counters wo-counters">(.*?)</nav>', html, re.S).group(1)
    assert re.search(r'Open</div><div class="value">2<', counters)
    assert "0 of 2 closed" in counters and "Alert latency" in counters
    assert re.search(r"median \(p50\) · p95 [\d.]+ s · 2 alerts", counters), counters  # which figure is which


def test_the_list_refreshes_as_a_fragment_with_its_empty_state(client, auth):
    auth.as_role("viewer")
    fragment = client.get("/workorders?status=closed", headers=HX).get_data(as_text=True)
    assert "<html" not in fragment and "<strong>No work order matches.</strong>" in fragment


def test_status_filter_and_assigned_to_me(app, client, auth, runs, clock):
    app.config.update(WORKORDER_URL="")
    kept, closed = dead(runs, clock), dead(runs, clock, code="gone", message="other")
    me = auth.as_role("operator")
    post(client, auth, f"/workorders/{kept.work_order_id}/acknowledge")
    post(client, auth, f"/workorders/{closed.work_order_id}/close", {"close-note": "won't fix: account retired"})
    active = client.get("/workorders").get_data(as_text=True)
    assert f"wo-row-{kept.work_order_id}" in active and f"wo-row-{closed.work_order_id}" not in active
    shut = client.get("/workorders?status=closed").get_data(as_text=True)
    assert f"wo-row-{closed.work_order_id}" in shut and f"wo-row-{kept.work_order_id}" not in shut
    mine = client.get("/workorders?status=all&mine=1").get_data(as_text=True)
    assert f"wo-row-{kept.work_order_id}" in mine and order(kept.work_order_id).assignee_id == me.id
    assert f"wo-row-{closed.work_order_id}" not in mine
    empty = client.get("/workorders?status=open").get_data(as_text=True)
    assert "No open work orders." in empty


def test_the_list_narrows_to_a_tenant_and_an_opening_period_as_the_reports_card_asks(app, client, auth, runs, clock):
    app.config.update(WORKORDER_URL="")
    db.session.add(Tenant(name="acme"))
    db.session.commit()
    # Two hours back: the hour moved on below stays inside the page's 7 days, read on the real clock (from now, it
    # left them after 23:00 UTC).
    clock.set(utcnow() - timedelta(hours=2))
    early = dead(runs, clock)
    clock.advance(3600)
    later, acme = dead(runs, clock, code="gone", message="other"), dead(runs, clock, tenant="acme")
    auth.as_role("manager")
    since = f"{clock():%Y-%m-%dT%H:%M}"
    page = client.get(f"/workorders?status=all&tenant=default&since={since}").get_data(as_text=True)
    rows = set(re.findall(r"wo-row-(\d+)", page))
    assert rows == {str(later.work_order_id)}, rows
    assert f"Only tenant <strong>default</strong>'s work orders opened from {since.replace('T', ' ')} UTC" in page
    assert str(early.work_order_id) not in rows and str(acme.work_order_id) not in rows
    assert client.get("/workorders?since=yesterday").status_code == 422
    bogus = client.get("/workorders?status=opne")
    assert bogus.status_code == 422 and ("status=opne is not a work order filter; use one of active, open, "
                                         "acknowledged, closed, all") in bogus.get_data(as_text=True)
    # The completion card reads the same narrowing, so it says what the Reports card that links here said.
    db.session.execute(WorkOrder.__table__.update().where(WorkOrder.id == early.work_order_id).values(
        status="closed"))
    db.session.commit()
    card = re.search(r'<div class="label">Completion · ([^<]+)</div>.*?<div class="subtle">([^<]+)<', page, re.S)
    assert card.groups() == ("as filtered", "0 of 1 closed · target ≥ 95%")
    whole = client.get("/workorders?status=all").get_data(as_text=True)
    card = re.search(r'<div class="label">Completion · ([^<]+)</div>.*?<div class="subtle">([^<]+)<', whole, re.S)
    assert card.groups() == ("7 d", "1 of 3 closed · target ≥ 95%")


def test_detail_lists_the_dead_letters_with_links_to_runs_and_the_dlq(app, client, auth, runs, clock):
    letter = dead(runs, clock)
    auth.as_role("viewer")
    html = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    assert f'<a href="/runs/{letter.run_id}">Run #{letter.run_id}</a>' in html
    assert f'href="/dlq/?group={letter.fingerprint}"' in html
    assert "1 open of 1" in html and "account 1000 is closed" in html
    assert "retry limit reached" in html or "dead letter" in html  # the alert queued with it
    assert "data-handlers" not in html  # one handler: the title names it
    # The same error from another handler joins the group's order; the page names both handlers.
    retryable = {key: value for key, value in FATAL.items() if key != "error"}  # fatal would run its undo instead
    other_id = runs.submit("demo.flaky_compensated", retryable, policy={"max_attempts": 1}, clock=clock)
    assert execute(other_id, 0, clock=clock) == "dead"
    [other] = runs.dead_letters(other_id)
    assert other.work_order_id == letter.work_order_id
    html = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    assert ("<code>python:demo.flaky</code>, <code>python:demo.flaky_compensated</code> <span class=\"subtle\">· the "
            "same error from 2 handlers</span>") in html


def test_acknowledge_takes_the_work_order_and_is_audited(app, client, auth, runs, clock):
    letter = dead(runs, clock)
    me = auth.as_role("operator", "olga")
    response = post(client, auth, f"/workorders/{letter.work_order_id}/acknowledge")
    assert response.status_code == 303 and response.location.endswith(f"/workorders/{letter.work_order_id}")
    worked = order(letter.work_order_id)
    assert (worked.status, worked.assignee_id) == ("acknowledged", me.id) and worked.acknowledged_at is not None
    [entry] = audit_rows("work_order.acknowledge", letter.work_order_id)
    assert (entry.actor, entry.before, entry.after) == (
        "olga", {"status": "open", "assignee": None}, {"status": "acknowledged", "assignee": "olga"})
    again = post(client, auth, f"/workorders/{letter.work_order_id}/acknowledge", headers=HX)
    assert again.status_code == 409 and "only open work orders can be acknowledged" in again.get_data(as_text=True)


def test_acknowledge_from_the_list_swaps_just_the_row(app, client, auth, runs, clock):
    letter = dead(runs, clock)
    auth.as_role("operator")
    response = post(client, auth, f"/workorders/{letter.work_order_id}/acknowledge",
                    headers={**HX, "HX-Target": f"wo-row-{letter.work_order_id}"})
    body = response.get_data(as_text=True).strip()
    assert response.status_code == 200 and body.startswith(f'<tr id="wo-row-{letter.work_order_id}">')
    assert "acknowledged</span>" in body and "<html" not in body and ">Acknowledge</button>" not in body


def test_assign_to_a_person_and_to_me(app, client, auth, runs, clock):
    letter = dead(runs, clock)
    colleague = auth.make_user("pat", "operator")
    auth.make_user("vic", "viewer")
    me = auth.as_role("operator", "olga")
    path = f"/workorders/{letter.work_order_id}/assign"
    page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    assert ">pat (operator)</option>" in page and "vic (viewer)" not in page  # only people who can work it
    assert post(client, auth, path, {"assign-user": str(colleague.id)}).status_code == 303
    assert order(letter.work_order_id).assignee_id == colleague.id
    response = post(client, auth, path, {"me": "1"}, headers=HX)
    assert response.status_code == 200 and "assigned to you" in response.get_data(as_text=True)
    assert order(letter.work_order_id).assignee_id == me.id
    assert post(client, auth, path, {"me": "1"}).status_code == 303  # to whom it is already: nothing to audit
    assert [e.after for e in audit_rows("work_order.assign", letter.work_order_id)] == [
        {"assignee": "pat"}, {"assignee": "olga"}]
    page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    select_tag = re.search(r'<select[^>]*id="assign-user"[^>]*>', page).group(0)
    assert "required" not in select_tag  # the browser refused to send "nobody" (helper 108)
    assert post(client, auth, path, {"assign-user": ""}).status_code == 303
    assert order(letter.work_order_id).assignee_id is None
    viewer = db.session.execute(select(type(me)).where(type(me).username == "vic")).scalar_one()
    refused = post(client, auth, path, {"assign-user": str(viewer.id)}, headers=HX)
    assert refused.status_code == 422 and "pick an active operator" in refused.get_data(as_text=True)


def test_a_stale_page_does_not_take_a_work_order_someone_took_meanwhile(app, client, auth, runs, clock):
    """Three people pressing Assign to me on one page were each told it was theirs, and the audit said each took it
    from nobody (helper 122)."""
    letter = dead(runs, clock)
    pat = auth.make_user("pat", "operator")
    auth.as_role("operator", "olga")
    path = f"/workorders/{letter.work_order_id}/assign"
    page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    assert page.count('<input type="hidden" name="seen" value="">') == 2  # both forms say whom the page showed
    changes.assign(order(letter.work_order_id), pat.id, Actor("pat", pat.id))  # pat took it after olga's page drew
    refused = post(client, auth, path, {"me": "1", "seen": ""}, headers=HX)
    assert refused.status_code == 409
    assert (f"work order #{letter.work_order_id} was assigned to pat meanwhile (the page showed nobody); look again"
            in refused.get_data(as_text=True))
    assert order(letter.work_order_id).assignee_id == pat.id
    assert [(e.before, e.after) for e in audit_rows("work_order.assign", letter.work_order_id)] == [
        ({"assignee": None}, {"assignee": "pat"})]
    # Said knowingly, from the page drawn again, it is taken over, and the audit says from whom.
    assert post(client, auth, path, {"me": "1", "seen": str(pat.id)}).status_code == 303
    assert [(e.before, e.after) for e in audit_rows("work_order.assign", letter.work_order_id)][-1] == (
        {"assignee": "pat"}, {"assignee": "olga"})
    for garbage in ("x", "9" * 30, "-1"):
        assert post(client, auth, path, {"me": "1", "seen": garbage}, headers=HX).status_code == 422


def test_close_needs_a_note_then_closes_audits_and_resolves(app, client, auth, runs, clock):
    letter = dead(runs, clock)
    auth.as_role("operator", "olga")
    # A replayed letter whose run dies again keeps its work order open: the page says what closes it.
    assert ("It closes by itself once each of its dead letters is discarded or resolved, or replayed and its run "
            "ended well.") in client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    path = f"/workorders/{letter.work_order_id}/close"
    refused = post(client, auth, path, {"close-note": "  "}, headers=HX)
    assert refused.status_code == 422 and "a note is required" in refused.get_data(as_text=True)
    # The note box is marked and names its error, which is said as it arrives.
    assert_marked(refused.get_data(as_text=True), "textarea", "close-note", "say what was done")
    assert order(letter.work_order_id).status == "open"
    done = post(client, auth, path, {"close-note": "card processor fixed; will replay tomorrow"})
    assert done.status_code == 303
    closed = order(letter.work_order_id)
    assert (closed.status, closed.closed_by, closed.close_note) == (
        "closed", "olga", "card processor fixed; will replay tomorrow")
    [entry] = audit_rows("work_order.close", letter.work_order_id)
    assert (entry.note, entry.after) == ("card processor fixed; will replay tomorrow", {"status": "closed"})
    [resolve] = db.session.execute(select(OutboxMessage).where(OutboxMessage.kind == "resolve")).scalars().all()
    assert resolve.payload["incident_key"] == f"rebound-workorder-{letter.work_order_id}"
    page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    assert "card processor fixed" in page and "Close work order</button>" not in page
    # Closed by hand, its letter is still open: the page says where it stays.
    assert "Closed with 1 still open: it stays in the DLQ until replayed, resolved or discarded." in page


@pytest.mark.parametrize(("path", "data", "status", "said"), [
    # A refusal raised before the view answers (a NUL in any field), the letter of a stale page, a viewer's press.
    ("/workorders/{order}/close", {"close-note": "done\x00"}, 422, "close-note contains a NUL character"),
    ("/dlq/999999/replay", {}, 404, "no dead letter with id 999999. Nothing changed"),
])
def test_an_htmx_action_refused_outside_its_view_is_said_above_the_page_not_swapped_into_it(
        client, auth, runs, clock, path, data, status, said):
    """The whole error page was swapped into the card that asked: a second top bar and nav inside it, the note
    typed gone (helper 155)."""
    letter = dead(runs, clock)
    auth.as_role("operator", "olga")
    answer = post(client, auth, path.format(order=letter.work_order_id), data, headers=HX)
    text = answer.get_data(as_text=True)
    assert answer.status_code == status and said in text
    assert (answer.headers["HX-Retarget"], answer.headers["HX-Reswap"]) == ("#flashes", "innerHTML")
    assert text.lstrip().startswith('<div id="not-done" class="flash error" role="alert">') and "<nav" not in text
    # Without htmx (a browser with scripts off), the error page as before.
    plain = post(client, auth, path.format(order=letter.work_order_id), data)
    assert plain.status_code == status and "HX-Retarget" not in plain.headers and "<nav" in plain.get_data(as_text=True)


def test_the_close_says_which_channels_are_told_and_none_when_none_is_configured(app, client, auth, runs, clock):
    first, second = dead(runs, clock), dead(runs, clock, code="card_expired", message="card expired")
    auth.as_role("operator", "olga")
    done = post(client, auth, f"/workorders/{first.work_order_id}/close", {"close-note": "fixed"}, headers=HX)
    words = done.get_data(as_text=True)
    assert f"Closed work order #{first.work_order_id}." in words and "told it is resolved" not in words
    assert ("No channel that takes a resolve (PagerDuty, Slack, the alert webhook) is configured: none is told."
            in words)

    # The webhook and the work-order system were configured, and took the trigger and the ticket: the close said
    # no channel was configured, and the webhook was never told of the resolve.
    app.config.update(PAGERDUTY_URL="http://127.0.0.1:9/v2/enqueue", PAGERDUTY_ROUTING_KEY="r" * 32,
                      ALERT_WEBHOOK_URL="http://127.0.0.1:9/hooks", WORKORDER_URL="http://127.0.0.1:9/itsm")
    db.session.execute(update(WorkOrder).where(WorkOrder.id == second.work_order_id).values(external_id="WO-EXT-7"))
    db.session.commit()
    done = post(client, auth, f"/workorders/{second.work_order_id}/close", {"close-note": "fixed"}, headers=HX)
    assert ("PagerDuty and the alert webhook are told it is resolved. Close ticket WO-EXT-7 in the work-order "
            "system: it is not told.") in done.get_data(as_text=True)


def test_viewer_sees_no_actions_and_is_refused(app, client, auth, runs, clock):
    letter = dead(runs, clock)
    auth.as_role("viewer")
    listing = client.get("/workorders").get_data(as_text=True)
    detail = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    for html in (listing, detail):
        assert ">Acknowledge</button>" not in html and "Close work order" not in html and "Assign to me" not in html
    for action, data in (("acknowledge", {}), ("assign", {"me": "1"}), ("close", {"close-note": "x"}),
                         ("redeliver", {})):
        assert post(client, auth, f"/workorders/{letter.work_order_id}/{action}", data).status_code == 403
    assert order(letter.work_order_id).status == "open"


def test_a_tenant_limited_person_sees_only_their_tenant(app, client, auth, runs, clock):
    db.session.add(Tenant(name="acme"))
    db.session.commit()
    ours, theirs = dead(runs, clock, tenant="acme"), dead(runs, clock, tenant="default")
    user = auth.make_user("acme-op", "operator", tenant=db.session.execute(
        select(Tenant).where(Tenant.name == "acme")).scalar_one())
    auth.login(user.username)
    html = client.get("/workorders?status=all").get_data(as_text=True)
    assert f"wo-row-{ours.work_order_id}" in html and f"wo-row-{theirs.work_order_id}" not in html
    assert re.search(r'Open</div><div class="value">1<', html)
    assert client.get(f"/workorders/{theirs.work_order_id}").status_code == 404
    assert post(client, auth, f"/workorders/{theirs.work_order_id}/acknowledge").status_code == 404
    assert order(theirs.work_order_id).status == "open"


def messages_of(order_id: int, kind: str) -> list[str]:
    db.session.expire_all()
    return [m.status for m in db.session.execute(select(OutboxMessage).where(OutboxMessage.kind == kind)).scalars()
            if (m.payload or {}).get("work_order_id") == order_id]


def test_a_failed_work_order_request_is_sent_again_from_its_page(app, client, auth, runs, clock):
    with Receiver() as tickets:
        tickets.always(500)
        app.config.update(WORKORDER_URL=tickets.url)
        letter = dead(runs, clock)
        for _ in range(5):
            delivery_round.tick(clock)
            clock.advance(60)
        auth.as_role("operator")
        page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
        assert ">failed</span>" in page and "Send again</button>" in page
        tickets.always(200, {"id": "T-9"})
        response = post(client, auth, f"/workorders/{letter.work_order_id}/redeliver")
        assert response.status_code == 303
        delivery_round.tick(clock)
    assert order(letter.work_order_id).external_id == "T-9"
    assert [e.action for e in db.session.execute(select(AuditEntry).where(
        AuditEntry.action == "outbox.redeliver")).scalars()] == ["outbox.redeliver"]


def test_a_request_skipped_for_want_of_a_work_order_system_is_sent_again_only_once_one_is_set_up(app, client, auth,
                                                                                                   runs, clock):
    letter = dead(runs, clock)
    delivery_round.tick(clock)  # no work-order system configured: the request is skipped
    auth.as_role("operator")
    page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    # It offered Send again, said "it goes out within seconds", and the request was skipped again at once.
    assert "Send again</button>" not in page and "no channel configured for it (workorder)" in page
    refused = post(client, auth, f"/workorders/{letter.work_order_id}/redeliver", headers=HX)
    assert refused.status_code == 409
    said = refused.get_data(as_text=True)
    assert "no channel it goes to is set up (workorder): an admin sets one up under Admin → Channels" in said
    assert messages_of(letter.work_order_id, "workorder") == ["skipped"]
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("admin", "ada")  # who can set one up is shown where
    assert ">set one up under Channels</a>" in client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    client.post("/logout", data={"csrf_token": auth.csrf()})
    # An admin of one tenant cannot open Channels (every tenant's): told who can, not linked to a 403 (helper 165).
    auth.make_user("tia", "admin", tenant=db.session.get(Tenant, db.session.get(WorkOrder, letter.work_order_id)
                                                          .tenant_id))
    auth.login("tia")
    page = client.get(f"/workorders/{letter.work_order_id}").text
    assert "/admin/channels" not in page and "an admin of every tenant sets one up under Channels" in page
    app.config.update(WORKORDER_URL="https://itsm.example.com/api/tickets")
    assert "Send again</button>" in client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)


def test_a_closed_work_orders_request_is_not_offered_again(app, client, auth, runs, clock):
    letter = dead(runs, clock)
    delivery_round.tick(clock)  # no work-order system configured: the request is skipped
    app.config.update(WORKORDER_URL="https://itsm.example.com/api/tickets")  # set up since
    auth.as_role("operator")
    assert "Send again</button>" in client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    post(client, auth, f"/workorders/{letter.work_order_id}/close", {"close-note": "fixed"}, headers=HX)
    page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    assert "Send again</button>" not in page  # it opened a ticket for work already done
    refused = post(client, auth, f"/workorders/{letter.work_order_id}/redeliver", headers=HX)
    assert refused.status_code == 409 and "would open it again" in refused.get_data(as_text=True)


def test_an_alert_not_sent_because_its_order_closed_reads_not_sent_not_internal_only(app, client, auth, runs, clock):
    letter = dead(runs, clock)  # its alert waits in the outbox
    auth.as_role("operator")
    post(client, auth, f"/workorders/{letter.work_order_id}/close", {"close-note": "fixed"}, headers=HX)
    delivery_round.tick(clock)
    page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    badge = re.search(r'<span class="badge idle" title="([^"]*)">not sent</span>', page)
    assert badge and badge.group(1).startswith(f"not sent: work order #{letter.work_order_id} was closed at ")


def test_the_work_orders_nav_item_follows_the_dlq(app, client, auth):
    auth.as_role("viewer")
    html = client.get("/workorders").get_data(as_text=True)
    nav = re.search(r"<nav[^>]*>(.*?)</nav>", html, re.S).group(1)
    labels = re.findall(r"<a [^>]*>([^<]+)", nav)  # a label may be followed by its count
    assert labels[labels.index("DLQ") + 1] == "Work orders"


def test_the_list_counts_a_work_orders_open_letters_as_its_page_does(client, auth, runs, clock):
    first = dead(runs, clock, message="account 1000 is closed")
    dead(runs, clock, message="account 2000 is closed")  # the same error group
    discards.discard(first, "a duplicate order", Actor("olga"), clock)
    auth.as_role("operator")
    html = client.get("/workorders").get_data(as_text=True)
    row = re.search(rf'<tr id="wo-row-{first.work_order_id}">(.*?)</tr>', html, re.S).group(1)
    assert '<td class="num">1 <span class="subtle">open of 2</span></td>' in row
    page = client.get(f"/workorders/{first.work_order_id}").get_data(as_text=True)
    assert "1 open of 2" in page and "1 of its dead letters is still open;" in page
    # Closed by the last discard, its note says how its letters were settled, not every way one can be (helper 108).
    second = db.session.execute(select(DeadLetter).where(DeadLetter.work_order_id == first.work_order_id,
                                                         DeadLetter.id != first.id)).scalar_one()
    discards.discard(second, "a duplicate too", Actor("olga"), clock)
    assert changes.close_settled(clock) == [first.work_order_id]
    assert order(first.work_order_id).close_note == "Every linked dead letter is settled (2): 2 discarded."


def test_a_held_repeat_reads_held_and_on_a_closed_order_that_it_will_not_be_sent(app, client, auth, runs, clock):
    # It read "pending" on the closed order's page: about to go out, though the close had settled it (helper 108).
    letter = dead(runs, clock)
    [alert] = db.session.execute(select(OutboxMessage).where(OutboxMessage.kind == "alert")).scalars().all()
    alert.next_attempt_at = alert.created_at + timedelta(seconds=300)  # as a delivery round holds a repeat
    db.session.commit()
    auth.as_role("operator", "olga")
    page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    assert f"held until {alert.next_attempt_at:%H:%M:%S} UTC" in page
    changes.close(order(letter.work_order_id), "fixed", Actor("olga"), clock)
    page = client.get(f"/workorders/{letter.work_order_id}").get_data(as_text=True)
    assert "held · will not be sent" in page


def test_the_alert_latency_card_follows_the_pages_tenant_filter(client, auth, clock):
    # It followed the person's scope only: an admin's globex page timed another tenant's alert (helper 140).
    acme, globex = Tenant(name="acme"), Tenant(name="globex")
    db.session.add_all([acme, globex])
    db.session.flush()
    for letter_id, tenant in enumerate((acme, acme), start=1):
        db.session.add(OutboxMessage(kind="alert", dedup_key=f"dead:{letter_id}", tenant_id=tenant.id,
                                     status="delivered", payload={"rule": "dead_letter", "dead_letter_id": letter_id},
                                     created_at=clock() - timedelta(minutes=5), first_sent_at=clock()))
    db.session.commit()
    auth.as_role("admin")
    for tenant, said in (("acme", "2 alerts"), ("globex", "no alert sent yet"), ("", "2 alerts")):
        html = client.get(f"/workorders?tenant={tenant}").get_data(as_text=True)
        card = re.search(r"Alert latency · 24 h</div>.*?</div>\s*<div class=\"subtle\">(.*?)</div>", html, re.S)
        assert said in card.group(1), (tenant, card.group(1))


def test_the_nav_counts_the_work_orders_assigned_to_the_person(app, client, auth, runs, clock):
    """What is theirs shows beside Work orders, as what waits for an approver shows beside Approvals (helper 153)."""
    letter = dead(runs, clock)
    nav = re.compile(r'Work orders<span id="nav-count-workorders-index">(.*?)</span></a>', re.S)
    auth.as_role("operator", "olga")
    assert nav.search(client.get("/overview").text).group(1) == ""
    acknowledged = post(client, auth, f"/workorders/{letter.work_order_id}/acknowledge", headers=HX)  # takes it
    # Said at once beside Work orders, out of band with the answer: the nav read nothing until a reload (helper 164).
    assert ('<span id="nav-count-workorders-index" hx-swap-oob="true"> <span class="nav-count" title="1 waiting for '
            'you: 1 work order assigned to you">1<') in acknowledged.text
    counted = nav.search(client.get("/overview").text).group(1)
    assert 'title="1 waiting for you: 1 work order assigned to you">1<' in counted
    changes.close(order(letter.work_order_id), "restarted the carrier gateway", Actor("olga"))
    assert nav.search(client.get("/overview").text).group(1) == ""


def test_people_leave_notes_on_a_work_order_for_the_next_person_on_call(app, client, auth, runs, clock):
    """Nothing but the close note said what anyone had tried: a hand-over lived in a chat somewhere else."""
    letter = dead(runs, clock)
    auth.as_role("operator", "olga")
    path = f"/workorders/{letter.work_order_id}"
    assert "No notes yet." in client.get(path).text
    added = post(client, auth, f"{path}/notes", {"note-note": "gateway certificate expired at 02:10; renewing"},
                 headers=HX)
    assert added.status_code == 200 and "Note added." in added.text
    assert "gateway certificate expired at 02:10; renewing" in added.text and "olga · " in added.text
    # The box is emptied: the note left in it invited a second press that saved it twice (helper 164).
    box = re.search(r'<textarea[^>]*name="note-note"[^>]*>(.*?)</textarea>', added.text, re.S)
    assert box and box.group(1).strip() == ""
    empty = post(client, auth, f"{path}/notes", {"note-note": "   "}, headers=HX)
    assert empty.status_code == 422 and "write the note: what you tried, found or hand over" in empty.text
    changes.close(order(letter.work_order_id), "renewed the certificate", Actor("olga"))
    assert post(client, auth, f"{path}/notes", {"note-note": "postmortem: PM-12"}).status_code == 303  # closed too
    [first, later] = audit_rows("work_order.note", letter.work_order_id)
    assert (first.actor, first.note, later.note) == ("olga", "gateway certificate expired at 02:10; renewing",
                                                    "postmortem: PM-12")
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("viewer", "vic")
    page = client.get(path).text
    assert page.index("gateway certificate") < page.index("postmortem: PM-12") and "Add note</button>" not in page
    assert post(client, auth, f"{path}/notes", {"note-note": "hi"}).status_code == 403
