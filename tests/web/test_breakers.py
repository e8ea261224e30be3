"""Breakers: open ones show up with their counts and the runs they hold back; reset is audited; viewers cannot."""

import re

from console.domain.breaker import BreakerMode, BreakerSettings
from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import AuditEntry, Tenant
from console.services.actor import Actor
from console.services.engine import breakers
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants

SETTINGS = BreakerSettings(failure_threshold=3, open_s=120)
HANDLER = "plugin:billing.charge"


def open_breaker(handler: str = HANDLER) -> None:
    now = utcnow()
    for _ in range(SETTINGS.failure_threshold):
        breakers.record(handler, False, now, SETTINGS)
    assert breakers.state_of(handler, now).state == BreakerMode.OPEN


def breaker_row(page: str, handler: str) -> str | None:
    match = re.search(rf'<tr class="breaker-\w+" data-handler="{re.escape(handler)}">(.*?)</tr>', page, re.S)
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
    assert '<span class="badge open"' in cells[1]
    assert (cells[2], cells[3]) == ("3", "0")  # failures, successes in a row
    assert re.search(r"in (1 min \d+|2 min 0) s", cells[5])  # open for 120 s from now
    assert cells[7] == "1"  # runs held back
    assert 'data-counter="open">1<' in page and 'data-counter="held">1<' in page


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
