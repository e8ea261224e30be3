"""Seed 001's POST /ops/capacity/reserve: a tenant reserves running slots and queued runs for a time range."""

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from console.extensions import db
from console.models import AuditEntry, Reservation, User
from console.services.actor import Actor
from console.services.people import tenants
from console.services.scheduling import reservations
from console.services.scheduling.forecast import forecast
from tests.engine.test_concurrent_writers import race
from tests.factories import bearer, make_tenant


def _at(hours: float) -> str:
    """An ISO moment `hours` from the real now (the API reads the system clock)."""
    return (datetime.now(UTC) + timedelta(hours=hours)).replace(microsecond=0).isoformat()


def _reserve(client, headers, tenant="acme", slots=3, start=1, end=5, **extra):
    body = {"tenant": tenant, "running_slots": slots, "starts_at": _at(start), "ends_at": _at(end),
            "reason": "month-end batch", **extra}
    return client.post("/ops/capacity/reserve", json=body, headers=headers)


@pytest.fixture
def admin(auth):
    make_tenant("acme")
    make_tenant("globex")
    return bearer(auth.make_user("root", "admin"))


def test_a_reservation_is_created_listed_and_audited(client, app, admin):
    response = _reserve(client, admin, slots=3, queued_runs=500)
    assert response.status_code == 201, response.get_json()
    made = response.get_json()
    assert (made["tenant"], made["running_slots"], made["queued_runs"]) == ("acme", 3, 500)
    assert made["created_by"].startswith("root")
    assert response.headers["Location"] == f"/ops/capacity/reservations/{made['id']}"
    assert client.get(response.headers["Location"], headers=admin).get_json() == made
    globex_only = bearer(db.session.execute(select(User).where(User.username == "root")).scalar_one(),
                       tenant=tenants.find("globex"))
    assert client.get(response.headers["Location"], headers=globex_only).status_code == 404  # another tenant's
    listed = client.get("/ops/capacity/reservations", headers=admin).get_json()["reservations"]
    assert [r["id"] for r in listed] == [made["id"]]
    for tenant, found in (("acme", [made["id"]]), ("globex", [])):
        listed = client.get(f"/ops/capacity/reservations?tenant={tenant}", headers=admin).get_json()["reservations"]
        assert [r["id"] for r in listed] == found
    assert client.get("/ops/capacity/reservations?tenant=nobody", headers=admin).status_code == 422
    # A typo is not taken for "no" (helper 135); yes and no read as they say.
    assert client.get("/ops/capacity/reservations?include_past=maybe", headers=admin).get_json()["field"] == \
        "include_past"
    for said in ("yes", "0", "TRUE"):
        assert client.get(f"/ops/capacity/reservations?include_past={said}", headers=admin).status_code == 200
    entry = db.session.execute(select(AuditEntry).where(AuditEntry.action == "capacity.reserve")).scalar_one()
    assert (entry.actor[:4], entry.tenant, entry.after["running_slots"]) == ("root", "acme", 3)


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"starts_at": _at(5), "ends_at": _at(1)}, "ends_at", "must be after starts_at"),
    ({"starts_at": _at(-3), "ends_at": _at(1)}, "starts_at", "in the past"),
    # The C library wrote the year 1 as "1-01-01 00:00 UTC" (helper 155).
    ({"starts_at": "0001-01-01T00:00:00Z", "ends_at": _at(1)}, "starts_at", "starts_at (0001-01-01 00:00 UTC) is in"),
    ({"running_slots": 0}, "running_slots", "from 1 to 100"),
    ({"running_slots": 101}, "running_slots", "from 1 to 100"),
    ({"running_slots": None}, "running_slots", "from 1 to 100, and is required"),  # it said "got None" (helper 163)
    ({"queued_runs": -1}, "queued_runs", "whole number"),
    ({"reason": " "}, "reason", "reason"),
    ({"starts_at": "tomorrow"}, "starts_at", "ISO 8601"),
    ({"starts_at": "2030-01-01T10:00:00"}, "starts_at", "time zone"),
    ({"ends_at": _at(24 * 400)}, "ends_at", "at most 366 days"),
    ({"tenant": "nobody"}, "tenant", "no tenant named 'nobody'"),  # a 422 as in every body, not a 404
])
def test_bad_input_says_what_to_fix_and_writes_nothing(client, admin, change, field, words):
    body = {"tenant": "acme", "running_slots": 2, "starts_at": _at(1), "ends_at": _at(2), "reason": "batch", **change}
    response = client.post("/ops/capacity/reserve", json=body, headers=admin)
    assert response.status_code == 422, response.get_json()
    answer = response.get_json()
    assert words in answer["detail"] and answer.get("field") == field
    assert db.session.execute(select(func.count()).select_from(Reservation)).scalar_one() == 0


def test_over_reservation_is_refused_with_what_is_free(client, app, admin):
    app.config["CAPACITY_RUNNING"] = 10
    assert _reserve(client, admin, "acme", slots=6, start=1, end=5).status_code == 201
    assert _reserve(client, admin, "globex", slots=3, start=2, end=3).status_code == 201
    refused = _reserve(client, admin, "globex", slots=2, start=2.5, end=6)
    assert refused.status_code == 409
    detail = refused.get_json()["detail"]
    assert "up to 9 of the 10 running slots" in detail and "1 is free" in detail and "acme" in detail
    # After the busy range there is room again, and a range that only touches another's end does not overlap it.
    assert _reserve(client, admin, "globex", slots=10, start=5, end=6).status_code == 201
    assert db.session.execute(select(func.count()).select_from(Reservation)).scalar_one() == 3


def test_cancelling_frees_the_slots_once(client, app, admin):
    app.config["CAPACITY_RUNNING"] = 4
    made = _reserve(client, admin, slots=4).get_json()
    assert _reserve(client, admin, "globex", slots=1).status_code == 409
    cancelled = client.delete(f"/ops/capacity/reservations/{made['id']}", headers=admin)
    assert cancelled.status_code == 200 and cancelled.get_json()["cancelled_by"].startswith("root")
    assert client.delete(f"/ops/capacity/reservations/{made['id']}", headers=admin).status_code == 409
    for unknown in ("9999", "99999999999999999999", "abc", "-1"):
        assert client.delete(f"/ops/capacity/reservations/{unknown}", headers=admin).status_code == 404
    assert _reserve(client, admin, "globex", slots=4).status_code == 201
    assert client.get("/ops/capacity/reservations", headers=admin).get_json()["reservations"][0]["tenant"] == "globex"
    actions = db.session.execute(select(AuditEntry.action).where(AuditEntry.target_type == "reservation")).scalars()
    assert sorted(actions) == ["capacity.cancel", "capacity.reserve", "capacity.reserve"]


def test_tenant_walls_hold_for_reservations(client, app, auth, admin):
    other = _reserve(client, admin, "globex", slots=1).get_json()

    acme = tenants.find("acme")
    scoped = bearer(auth.make_user("acme-admin", "admin", tenant=acme), tenant=acme)
    # Another tenant's is refused as every endpoint refuses it (it said "no tenant named 'globex'", a 404 when globex
    # exists), whether or not that tenant exists; none named is the token's own, as a submit's is.
    for named in ("globex", "initech"):
        refused = _reserve(client, scoped, named)
        assert refused.status_code == 403 and refused.get_json()["detail"] == (
            "you may reserve capacity only for tenant acme")
    mine = _reserve(client, scoped, None, slots=2)
    assert mine.status_code == 201 and mine.get_json()["tenant"] == "acme"
    listed = client.get("/ops/capacity/reservations", headers=scoped).get_json()["reservations"]
    assert [r["tenant"] for r in listed] == ["acme"]
    assert client.delete(f"/ops/capacity/reservations/{other['id']}", headers=scoped).status_code == 404
    # Reserving raises the tenant's quotas for the range; one limited to the tenant may not raise its own.
    over = _reserve(client, scoped, "acme", slots=1, queued_runs=acme.max_queued + 1)
    assert over.status_code == 422 and over.get_json()["field"] == "queued_runs"
    # A refusal says how much is free without naming the other tenants that hold the rest.
    app.config["CAPACITY_RUNNING"] = 3
    full = _reserve(client, scoped, "acme", slots=1)
    assert full.status_code == 409
    detail = full.get_json()["detail"]
    assert "(by acme, other tenants); 0 are free" in detail and "globex" not in detail
    viewer = bearer(auth.make_user("eve", "viewer"))
    assert _reserve(client, viewer, "acme").status_code == 403
    assert client.get("/ops/capacity/reservations", headers=viewer).status_code == 200


def test_two_reservations_racing_for_the_last_slots_get_one(app, clock):
    app.config["CAPACITY_RUNNING"] = 5
    make_tenant("acme")
    make_tenant("globex")
    start, end = clock() + timedelta(hours=1), clock() + timedelta(hours=2)
    # Each would fit alone; both would promise 6 of 5 if neither waited for the other's insert.
    results = race(app, 2, lambda i: reservations.create(("acme", "globex")[i], Actor("a"), running_slots=3,
                                                         starts_at=start, ends_at=end, reason="x", clock=clock))
    assert sorted(type(r).__name__ for r in results) == ["Conflict", "dict"], results
    assert db.session.execute(select(func.count()).select_from(Reservation)).scalar_one() == 1


def test_the_forecast_shows_reservations_in_its_horizon(app, clock):
    make_tenant("acme")
    now = clock()
    reservations.create("acme", Actor("a"), running_slots=2, queued_runs=10, starts_at=now + timedelta(hours=20),
                        ends_at=now + timedelta(hours=30), reason="month-end", clock=clock)
    reservations.create("acme", Actor("a"), running_slots=1, starts_at=now + timedelta(hours=30),
                        ends_at=now + timedelta(hours=40), reason="later", clock=clock)
    shown = forecast(now, 24).as_dict()["reservations"]
    assert [(r["tenant"], r["running_slots"], r["reason"]) for r in shown] == [("acme", 2, "month-end")]
    assert forecast(now, 24, tenant="default").reservations == []


def test_the_forecast_counts_a_reservation_as_quota_while_it_holds(app, register, clock):
    tenant = make_tenant("acme")
    tenant.max_running = 1
    db.session.commit()
    register(tenant="acme", cron="* * * * *")  # every minute, each run expected to take its policy's timeout
    now = clock()
    assert forecast(now, 1).quota_overflows
    reservations.create("acme", Actor("a"), running_slots=50, starts_at=now, ends_at=now + timedelta(minutes=30),
                        reason="batch", clock=clock)
    minutes = {row["minute"] for row in forecast(now, 1).quota_overflows}
    assert minutes and min(minutes) >= (now + timedelta(minutes=30)).isoformat()


def test_a_tenant_limited_caller_naming_another_tenant_in_the_list_is_refused_not_ignored(client, auth, admin):
    _reserve(client, admin, tenant="globex")
    tenant = tenants.find("acme")
    acme = bearer(auth.make_user("acme-viewer", "viewer", tenant=tenant), tenant=tenant)
    refused = client.get("/ops/capacity/reservations?tenant=globex", headers=acme)
    assert refused.status_code == 403 and "tenant acme" in refused.get_json()["detail"]
    assert client.get("/ops/capacity/reservations?tenant=acme", headers=acme).get_json()["reservations"] == []
