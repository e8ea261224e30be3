"""Capacity reservations in the console: listed on Admin → Tenants with a cancel button, and on the forecast page."""

import re
from datetime import timedelta

from sqlalchemy import select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Reservation
from console.services.actor import Actor
from console.services.scheduling import reservations
from tests.factories import make_tenant

BOSS = Actor("boss")


def _text(response) -> str:
    return re.sub(r"\s+", " ", response.get_data(as_text=True))


def _reserve(tenant: str, slots: int, hours_from_now: float = 1, reason: str = "month-end batch") -> dict:
    start = utcnow() + timedelta(hours=hours_from_now)
    return reservations.create(tenant, BOSS, running_slots=slots, queued_runs=100, starts_at=start,
                               ends_at=start + timedelta(hours=4), reason=reason)


def test_the_tenants_page_lists_reservations_and_cancels_one(client, auth):
    make_tenant("acme")
    made = _reserve("acme", 3)
    auth.as_role("admin")
    page = _text(client.get("/admin/tenants"))
    assert f'id="reservation-{made["id"]}"' in page and "month-end batch" in page
    assert '<td class="num">3</td><td class="num">100</td>' in page
    # Without the CSRF token nothing changes.
    assert client.post(f"/admin/tenants/reservations/{made['id']}/cancel").status_code == 400
    cancelled = client.post(f"/admin/tenants/reservations/{made['id']}/cancel",
                            data={"csrf_token": auth.csrf("/admin/tenants")})
    assert cancelled.status_code == 303 and "/admin/tenants" in cancelled.location
    assert db.session.execute(select(Reservation.cancelled_by)).scalar_one() == "admin"
    page = _text(client.get("/admin/tenants"))
    assert "Cancelled reservation" in page and "No capacity reserved now or later." in page
    again = client.post(f"/admin/tenants/reservations/{made['id']}/cancel",
                        data={"csrf_token": auth.csrf("/admin/tenants")}, follow_redirects=True)
    assert "was cancelled already" in _text(again)


def test_a_scoped_admin_sees_and_cancels_only_their_tenants_reservations(client, auth):
    acme = make_tenant("acme")
    make_tenant("globex")
    _reserve("acme", 1, reason="acme payroll")
    theirs = _reserve("globex", 1, reason="globex secret")
    auth.make_user("ada", "admin", tenant=acme)
    assert auth.login("ada").status_code == 302
    page = _text(client.get("/admin/tenants"))
    assert "acme payroll" in page and "globex secret" not in page
    refused = client.post(f"/admin/tenants/reservations/{theirs['id']}/cancel",
                          data={"csrf_token": auth.csrf("/admin/tenants")})
    assert refused.status_code == 404
    assert db.session.execute(select(Reservation.cancelled_at).where(Reservation.id == theirs["id"])).scalar() is None


def test_the_forecast_page_shows_reservations_in_its_horizon(client, auth):
    make_tenant("acme")
    _reserve("acme", 2, hours_from_now=2, reason="quarter close")
    _reserve("acme", 1, hours_from_now=48, reason="far away")
    auth.as_role("viewer")
    page = _text(client.get("/tasks/forecast"))
    assert "Capacity reservations" in page and "quarter close" in page and "far away" not in page
    assert "far away" in _text(client.get("/tasks/forecast?horizon=7d"))
