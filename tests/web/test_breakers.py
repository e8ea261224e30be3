"""Breakers: open ones show up with their counts and the runs they hold back; reset is audited; viewers cannot."""

import json
import re
from datetime import timedelta

from console.domain.breaker import BreakerMode, BreakerSettings
from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import AuditEntry, OutboxMessage, Tenant
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.engine import breakers
from console.services.engine.breakers import BreakerKey
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.policies import versions as policies
from console.services.scheduling import tasks as task_service
from tests.factories import make_tenant

SETTINGS = BreakerSettings(failure_threshold=3, open_s=120)
HANDLER = "plugin:billing.charge"


def open_breaker(handler: str | BreakerKey = HANDLER) -> None:
    now = utcnow()
    for _ in range(SETTINGS.failure_threshold):
        breakers.record(handler, False, now, SETTINGS)
    assert breakers.state_of(handler, now).state == BreakerMode.OPEN


def breaker_row(page: str, handler: str, tenant: str | None = None) -> str | None:
    of_tenant = f' data-tenant="{re.escape(tenant)}"' if tenant else ""
    match = re.search(rf'<tr class="breaker-\w+" data-handler="{re.escape(handler)}"{of_tenant}>(.*?)</tr>', page, re.S)
    return match.group(1) if match else None


def reset_audits() -> list[AuditEntry]:
    return db.session.query(AuditEntry).filter_by(action="breaker.reset").all()


def test_an_open_breaker_shows_its_state_counts_countdown_and_held_runs(client, auth):
    run, _ = submit(tenants.find("default"), Actor("test"), handler="demo.noop")
    open_breaker(run.handler)
    assert execute(run.id, 0, clock=FrozenClock(utcnow())) == "breaker_open"  # the run waits, no attempt spent
    auth.as_role("viewer")
    response = client.get("/breakers/")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    row = breaker_row(page, run.handler)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert cells[1] == "every tenant"  # the default scope: one breaker per handler
    assert '<span class="badge open"' in cells[2]
    # Failures in a row, of the threshold that opened it (its settings': 3); successes in a row.
    assert (re.sub(r"<[^>]+>", "", cells[3]), cells[4]) == ("3 of 3", "0")
    assert re.search(r"in (1 min \d+|2 min 0) s", cells[6])  # open for 120 s from now
    assert cells[8] == "1"  # runs held back
    assert 'data-counter="open">1<' in page and 'data-counter="held">1<' in page


def test_a_breaker_its_failed_probe_opened_again_says_so_not_a_threshold(client, auth):
    open_breaker()
    probing = utcnow() + timedelta(seconds=SETTINGS.open_s + 1)
    assert breakers.allow(HANDLER, probing, SETTINGS).allowed  # half-open: this call is the probe
    breakers.record(HANDLER, False, probing, SETTINGS)  # and it fails
    auth.as_role("viewer")
    row = breaker_row(client.get("/breakers/").get_data(as_text=True), HANDLER)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert re.sub(r"<[^>]+>", "", cells[3]) == "4"  # "4 of 3" read as if the threshold were not kept
    assert "opened again: its half-open probe failed" in cells[5] and "opened by policy" not in cells[5]


def test_a_breaker_shared_by_two_policies_says_whose_settings_opened_it(client, auth, runs):
    # Runs under `default` waited out policy w2-breaker's 120 s open time, and no page said why.
    policies.save("w2-breaker", {"max_attempts": 1, "breaker": {"failure_threshold": 2, "open_s": 120}}, Actor("test"))
    clock = FrozenClock(utcnow())
    for _ in range(2):
        assert execute(runs.submit("demo.flaky", {"fail_times": 9}, policy="w2-breaker"), 0, clock=clock) == "dead"
    held = runs.submit("demo.flaky", {"fail_times": 0})  # under policy default: 5 failures, open 30 s
    assert execute(held, 0, clock=clock) == "breaker_open"
    auth.as_role("viewer")
    row = breaker_row(client.get("/breakers/").get_data(as_text=True), "python:demo.flaky")
    assert "opened by policy w2-breaker v1: 2 failures in a row, open 120 s" in row
    assert '<td class="num" data-failures>2<span class="subtle"> of 2</span></td>' in row  # the opener's threshold
    assert ("shared by policies with different settings: default v1 (5 failures in a row, open 30 s), "
            "w2-breaker v1 (2 failures in a row, open 120 s)") in row
    waiting = re.search(r"<strong>Waiting:</strong>(.*?)</p>", client.get(f"/runs/{held}").get_data(as_text=True),
                        re.S).group(1)
    assert ("It was opened by policy w2-breaker v1 (2 failures in a row, open 120 s); this run&#39;s policy "
            "default v1 opens it after 5 failures in a row, for 30 s.") in waiting
    [put_off] = runs.events(held, "retry_wait")
    assert put_off.message == "the breaker was opened by policy w2-breaker v1 (2 failures in a row, open 120 s)"


def test_a_closed_breakers_failures_read_against_the_threshold_that_counted_them(client, auth, runs):
    # Six failures under a policy whose threshold is 50, whose runs have all finished: not "6 of 5" (today's default).
    now = utcnow()
    for _ in range(6):
        breakers.record("python:demo.flaky", False, now, BreakerSettings(failure_threshold=50, open_s=60))
    runs.submit("demo.flaky", {"fail_times": 0})  # a live run under the default policy (threshold 5)
    auth.as_role("viewer")
    row = breaker_row(client.get("/breakers/").get_data(as_text=True), "python:demo.flaky")
    assert '<td class="num" data-failures>6<span class="subtle"> of 50</span></td>' in row


def test_failures_past_the_threshold_read_as_more_than_it_not_as_a_miscount(client, auth):
    """Calls already at work when it opened fail after it: the page read "6 of 5" (helper 142)."""
    now, settings = utcnow(), BreakerSettings(failure_threshold=5, open_s=60)
    for _ in range(6):
        breakers.record("python:demo.flaky", False, now, settings)
    auth.as_role("viewer")
    row = breaker_row(client.get("/breakers/").get_data(as_text=True), "python:demo.flaky")
    assert '<td class="num" data-failures>6<span class="subtle"> (opens at 5)</span></td>' in row


def test_a_breaker_stored_before_it_kept_its_threshold_reads_against_the_policies_counting_there(client, auth, runs):
    get_redis().set(breakers._key("python:demo.flaky"), json.dumps({"state": "closed", "consecutive_failures": 2}))
    runs.submit("demo.flaky", {"fail_times": 0})  # default: 5
    auth.as_role("viewer")
    row = breaker_row(client.get("/breakers/").get_data(as_text=True), "python:demo.flaky")
    assert '<td class="num" data-failures>2<span class="subtle"> of 5</span></td>' in row


def test_after_a_reset_a_held_run_says_its_breaker_was_reset_not_that_it_is_open(client, auth):
    task = task_service.register(tenants.find("default"), {"name": "charge-cards", "handler": "demo.noop",
                                                            "event": "cards.charge"}, Actor("test"))
    run, _ = submit(tenants.find("default"), Actor("test"), task=task)
    open_breaker(run.handler)
    assert execute(run.id, 0, clock=FrozenClock(utcnow())) == "breaker_open"
    auth.as_role("operator", "olga")
    lists = (f"/runs?task={task.id}", f"/tasks/{task.id}", "/tasks")
    for path in lists:
        assert "breaker open" in client.get(path).get_data(as_text=True), path
    client.post(f"/breakers/{run.handler}/reset", data={"csrf_token": auth.csrf("/breakers/")})
    (entry,) = reset_audits()
    reset_at = f"{entry.at:%H:%M:%S}"
    for path in lists:  # the run waits for its retry as before, but its breaker is no longer open
        page = client.get(path).get_data(as_text=True)
        assert "breaker open" not in page and "breaker reset <time" in page and f">{reset_at}</time>" in page, path
        assert 'title="waiting to retry; breaker reset at ' in page, path
    shown = client.get(f"/runs/{run.id}").get_data(as_text=True)
    heading = re.search(r"<h1>(.*?)</h1>", shown, re.S).group(1)  # the timeline keeps what happened: put off, open
    assert "breaker open" not in heading and "breaker reset <time" in heading and f">{reset_at}</time>" in heading
    waiting = re.search(r"<strong>Waiting:</strong>(.*?)</p>", shown, re.S).group(1)
    # Its moments as <time>, so Local time reads them in the person's zone as the page's other times (helper 156).
    reset_moment = f'<time datetime="{entry.at:%Y-%m-%dT%H:%M:%S}+00:00">{entry.at:%Y-%m-%d %H:%M:%S} UTC</time>'
    assert waiting.endswith(f"(no attempt is spent). The breaker was reset at {reset_moment} by olga: the run goes "
                            "at its next try.")


def test_live_refresh_returns_only_the_region(client, auth):
    open_breaker()
    auth.as_role("viewer")
    fragment = client.get("/breakers/", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="breakers-live" hx-get="/breakers/" hx-trigger="every 5s"')
    assert HANDLER in fragment and "<html" not in fragment


def test_reset_closes_the_breaker_and_is_audited_with_before_and_after(client, auth):
    open_breaker()
    auth.as_role("operator", "olga")
    response = client.post(f"/breakers/{HANDLER}/reset", data={"csrf_token": auth.csrf("/breakers/")})
    assert response.status_code == 303 and response.headers["Location"] == "/breakers/"
    assert breakers.all_states(utcnow()) == {}
    (entry,) = reset_audits()
    assert (entry.actor, entry.target_type, entry.target_id) == ("olga", "breaker", HANDLER)
    assert (entry.before["state"], entry.before["consecutive_failures"]) == ("open", 3)
    assert (entry.after["state"], entry.after["consecutive_failures"]) == ("closed", 0)
    page = client.get("/breakers/").get_data(as_text=True)
    assert f"Reset the breaker of {HANDLER} (it was open, 3 failures in a row)" in page
    assert breaker_row(page, HANDLER) is None and "All breakers are closed" in page
    # The incident its opening started ends with it (a reset by hand left PagerDuty's open for good).
    [resolve] = db.session.query(OutboxMessage).filter_by(kind="resolve").all()
    assert resolve.dedup_key == f"resolve:rebound-breaker:{HANDLER}"
    assert resolve.payload["summary"] == f"olga reset the circuit breaker of {HANDLER} by hand: it is closed."


def test_reset_over_htmx_returns_the_refreshed_region(client, auth):
    open_breaker()
    open_breaker("python:demo.flaky")
    auth.as_role("operator")
    response = client.post(f"/breakers/{HANDLER}/reset", headers={"HX-Request": "true"},
                           data={"csrf_token": auth.csrf("/breakers/")})
    assert response.status_code == 200
    fragment = response.get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="breakers-live"') and "flash success" in fragment
    assert breaker_row(fragment, HANDLER) is None and breaker_row(fragment, "python:demo.flaky") is not None


def test_resetting_a_breaker_with_no_state_changes_nothing(client, auth):
    auth.as_role("operator")
    response = client.post("/breakers/python:demo.noop/reset", data={"csrf_token": auth.csrf("/breakers/")})
    assert response.status_code == 303
    assert "has no state to reset" in client.get("/breakers/").get_data(as_text=True)
    assert reset_audits() == []


def test_viewer_sees_no_reset_button_and_gets_403(client, auth):
    open_breaker()
    auth.as_role("viewer")
    page = client.get("/breakers/").get_data(as_text=True)
    assert breaker_row(page, HANDLER) is not None and "/reset" not in page
    response = client.post(f"/breakers/{HANDLER}/reset", data={"csrf_token": auth.csrf("/breakers/")})
    assert response.status_code == 403
    assert breakers.state_of(HANDLER, utcnow()).state == BreakerMode.OPEN and reset_audits() == []


def test_tenant_limited_operator_sees_only_their_handlers_and_cannot_reset_shared_breakers(client, auth):
    globex = Tenant(name="globex")
    db.session.add(globex)
    db.session.commit()
    ours, _ = submit(globex, Actor("test"), handler="demo.flaky")
    open_breaker(ours.handler)
    open_breaker()  # no globex run calls this handler
    auth.make_user("gina", "operator", tenant=globex)
    auth.login("gina")
    page = client.get("/breakers/").get_data(as_text=True)
    assert breaker_row(page, ours.handler) is not None and breaker_row(page, HANDLER) is None
    assert "/reset" not in page
    response = client.post(f"/breakers/{ours.handler}/reset", data={"csrf_token": auth.csrf("/breakers/")})
    assert response.status_code == 403 and reset_audits() == []


def test_empty_state_says_when_a_breaker_opens(client, auth):
    auth.as_role("viewer")
    page = client.get("/breakers/").get_data(as_text=True)
    assert "All breakers are closed" in page and "opens after 5 consecutive failures" in page



def test_page_says_redis_is_down_instead_of_failing(client, auth, redis_down):
    auth.as_role("operator")
    response = client.get("/breakers/")
    assert response.status_code == 200
    assert "Redis is unreachable, so breaker states cannot be read." in response.get_data(as_text=True)
    response = client.post(f"/breakers/{HANDLER}/reset", headers={"HX-Request": "true"},
                           data={"csrf_token": auth.csrf("/breakers/")})
    assert "Redis is unreachable" in response.get_data(as_text=True) and reset_audits() == []


PER_TENANT = {"breaker": {"scope": "handler_and_tenant"}}


def reset(client, auth, handler: str, tenant_id: int | None = None, **headers):
    data = {"csrf_token": auth.csrf("/breakers/"), **({"tenant": str(tenant_id)} if tenant_id else {})}
    return client.post(f"/breakers/{handler}/reset", data=data, headers=headers)


def test_per_tenant_breakers_show_their_tenant_and_count_only_their_own_held_runs(client, auth):
    globex = make_tenant("globex")
    default = tenants.find("default")
    theirs, _ = submit(globex, Actor("test"), handler="demo.flaky", policy=PER_TENANT)
    ours, _ = submit(default, Actor("test"), handler="demo.flaky")
    open_breaker(BreakerKey(theirs.handler, globex.id))
    open_breaker(theirs.handler)  # the same handler's shared breaker, for runs whose policy is per handler
    clock = FrozenClock(utcnow())
    assert execute(theirs.id, 0, clock=clock) == "breaker_open" and execute(ours.id, 0, clock=clock) == "breaker_open"
    auth.as_role("viewer")
    page = client.get("/breakers/").get_data(as_text=True)
    shared, own = breaker_row(page, theirs.handler), breaker_row(page, theirs.handler, "globex")
    assert shared is not None and own is not None
    assert '<td data-scope="handler">every tenant</td>' in shared
    assert '<td data-scope="handler_and_tenant">tenant <strong>globex</strong></td>' in own
    held = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[8] for row in (shared, own)]
    assert held == ["1", "1"]  # each breaker counts the run it holds, not the other's
    assert 'data-counter="open">2<' in page and 'data-counter="held">2<' in page


def test_a_held_run_counts_on_the_breaker_its_policy_uses_even_where_its_tenant_has_its_own(client, auth):
    # Any tenant's own breaker took its runs' count, so a closed one read as holding a run the shared one held.
    globex = make_tenant("globex")
    shared, _ = submit(globex, Actor("test"), handler="demo.flaky")  # policy default: the handler-wide breaker
    open_breaker(shared.handler)
    breakers.record(BreakerKey(shared.handler, globex.id), False, utcnow(), SETTINGS)  # globex's own: closed, 1 of 3
    assert execute(shared.id, 0, clock=FrozenClock(utcnow())) == "breaker_open"
    auth.as_role("viewer")
    page = client.get("/breakers/").get_data(as_text=True)
    held = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[8]
            for row in (breaker_row(page, shared.handler), breaker_row(page, shared.handler, "globex"))]
    assert held == ["1", "0"]


def test_reset_works_per_breaker_and_the_audit_names_the_tenant(client, auth):
    globex = make_tenant("globex")
    own = BreakerKey(HANDLER, globex.id)
    open_breaker(own)
    open_breaker()
    auth.as_role("operator", "olga")
    response = reset(client, auth, HANDLER, globex.id)
    assert response.status_code == 303
    assert set(breakers.all_states(utcnow())) == {BreakerKey(HANDLER)}  # the shared breaker stays open
    (entry,) = reset_audits()
    assert (entry.target_id, entry.tenant, entry.before["scope"], entry.before["state"]) == (
        HANDLER, "globex", "handler_and_tenant", "open")
    [resolve] = db.session.query(OutboxMessage).filter_by(kind="resolve").all()
    assert resolve.dedup_key == f"resolve:rebound-{own.alert_key}" and resolve.tenant_id == globex.id
    assert resolve.payload["summary"] == (f"olga reset the circuit breaker of {HANDLER} for globex by hand: it is "
                                          "closed.")
    assert f"Reset the breaker of {HANDLER} for globex (it was open" in client.get("/breakers/").get_data(as_text=True)
    assert reset(client, auth, HANDLER, "x9").status_code == 400  # a tenant must be an id
    assert reset(client, auth, HANDLER, 2**63).status_code == 400


def test_a_tenant_limited_operator_sees_and_resets_only_its_own_breakers(client, auth):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    run, _ = submit(globex, Actor("test"), handler="demo.flaky", policy=PER_TENANT)
    for tenant in (acme, globex):
        open_breaker(BreakerKey(run.handler, tenant.id))
    open_breaker(run.handler)  # handler-wide, of a handler globex runs: shown, but not globex's to reset
    open_breaker(HANDLER)  # handler-wide, of a handler globex never runs: not shown
    auth.make_user("gina", "operator", tenant=globex)
    auth.login("gina")
    page = client.get("/breakers/").get_data(as_text=True)
    assert breaker_row(page, run.handler, "globex") is not None and breaker_row(page, run.handler, "acme") is None
    assert breaker_row(page, run.handler) is not None and breaker_row(page, HANDLER) is None
    assert page.count('name="tenant"') == 1 and f'name="tenant" value="{globex.id}"' in page
    # Her tenant's held runs only, said so: on a shared breaker's row it read as the breaker's whole hold (helper 140).
    assert "Your tenant&#39;s runs held back</div>" in page and ">Your runs held</th>" in page
    assert reset(client, auth, run.handler).status_code == 403  # the shared breaker is every tenant's
    assert reset(client, auth, run.handler, acme.id).status_code == 303  # another tenant's: refused in the notice
    assert "breakers are not yours to reset" in client.get("/breakers/").get_data(as_text=True)
    assert breakers.state_of(BreakerKey(run.handler, acme.id), utcnow()).state == BreakerMode.OPEN
    assert reset_audits() == []
    assert reset(client, auth, run.handler, globex.id).status_code == 303
    assert not breakers.exists(BreakerKey(run.handler, globex.id)) and len(reset_audits()) == 1


def test_the_overview_counts_only_the_breakers_the_breakers_page_shows(client, auth):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    run, _ = submit(globex, Actor("test"), handler="demo.flaky", policy=PER_TENANT)
    open_breaker(BreakerKey(run.handler, globex.id))
    open_breaker(BreakerKey(run.handler, acme.id))  # another tenant's: not globex's business
    open_breaker(HANDLER)  # handler-wide, of a handler globex never runs
    auth.make_user("gina", "viewer", tenant=globex)
    auth.login("gina")
    assert 'data-counter="breakers_open">1<' in client.get("/overview").get_data(as_text=True)
    client.post("/logout", data={"csrf_token": auth.csrf("/overview")})
    auth.as_role("viewer", "vic")
    assert 'data-counter="breakers_open">3<' in client.get("/overview").get_data(as_text=True)


def test_the_probe_in_flight_and_the_run_whose_failure_opened_it_are_linked(client, auth):
    default = tenants.find("default")
    tipping, probe = (submit(default, Actor("test"), handler="demo.noop")[0].id for _ in range(2))
    for _ in range(SETTINGS.failure_threshold):
        breakers.record(HANDLER, False, utcnow(), SETTINGS, run_id=tipping)
    auth.as_role("viewer")
    cells = re.findall(r"<td[^>]*>(.*?)</td>", breaker_row(client.get("/breakers/").get_data(as_text=True), HANDLER),
                       re.S)
    assert f'the failure that opened it: <a href="/runs/{tipping}"' in cells[5]

    probing = utcnow() + timedelta(seconds=SETTINGS.open_s + 1)
    assert breakers.allow(HANDLER, probing, SETTINGS, probe).allowed  # half-open: this run's call is the probe
    cells = re.findall(r"<td[^>]*>(.*?)</td>", breaker_row(client.get("/breakers/").get_data(as_text=True), HANDLER),
                       re.S)
    assert "in flight" in cells[7] and f'<a href="/runs/{probe}" data-run="{probe}">run #{probe}</a>' in cells[7]

    breakers.record(HANDLER, False, probing, SETTINGS, run_id=probe)  # and it fails
    cells = re.findall(r"<td[^>]*>(.*?)</td>", breaker_row(client.get("/breakers/").get_data(as_text=True), HANDLER),
                       re.S)
    assert re.sub(r"<[^>]+>", "", cells[5]).endswith(f"opened again: its half-open probe (run #{probe}) failed")
    assert f'href="/runs/{probe}"' in cells[5] and "in flight" not in cells[7]


def test_a_shared_breaker_names_no_run_of_another_tenant_to_a_tenant_limited_person(client, auth):
    globex = Tenant(name="globex")
    db.session.add(globex)
    db.session.commit()
    ours = submit(globex, Actor("test"), handler="demo.flaky")[0]
    theirs = submit(tenants.find("default"), Actor("test"), handler="demo.flaky")[0].id
    for _ in range(SETTINGS.failure_threshold):
        breakers.record(ours.handler, False, utcnow(), SETTINGS, run_id=theirs)
    auth.make_user("gina", "viewer", tenant=globex)
    auth.login("gina")
    row = breaker_row(client.get("/breakers/").get_data(as_text=True), ours.handler)
    assert row is not None and "the failure that opened it" not in row and f"/runs/{theirs}" not in row
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("viewer")
    assert f'href="/runs/{theirs}"' in breaker_row(client.get("/breakers/").get_data(as_text=True), ours.handler)
