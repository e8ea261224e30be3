"""Capacity reservations in the console: listed on Admin → Tenants with a cancel button, and on the forecast page."""

import html as html_text
import re
from datetime import timedelta

import pytest
from sqlalchemy import select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import AuditEntry, Reservation
from console.services.actor import Actor
from console.services.people import tenants
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


# Reserving through the form on Admin → Tenants

def _typed(hours: float) -> str:
    """A UTC moment `hours` from now, as a person types it into the form (the page reads the system clock)."""
    return (utcnow() + timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M")


def _form(auth, **fields) -> dict:
    data = {"tenant": "acme", "running_slots": "5", "queued_runs": "200", "starts_at": _typed(1),
            "ends_at": _typed(5), "reason": "month-end close", **fields}
    return {"csrf_token": auth.csrf(), **{f"reserve-{name}": value for name, value in data.items()}}


def _stored() -> list[Reservation]:
    db.session.expire_all()
    return db.session.execute(select(Reservation).order_by(Reservation.id)).scalars().all()


def _audited() -> list[AuditEntry]:
    return db.session.execute(select(AuditEntry).where(AuditEntry.action == "capacity.reserve")).scalars().all()


def _form_errors(response) -> list[str]:
    """Return the error messages shown inside the reserve form."""
    html = response.get_data(as_text=True)
    start = html.index('id="reserve"')
    form = html[start:html.index("</form>", start)]
    return [html_text.unescape(re.sub(r"\s+", " ", e))
            for e in re.findall(r'<div class="field-error"[^>]*>(.*?)</div>', form)]


def test_an_admin_reserves_capacity_through_the_form(client, auth):
    make_tenant("acme")
    auth.as_role("admin")
    page = _text(client.get("/admin/tenants"))
    assert "Reserve capacity" in page and 'value="">choose a tenant</option>' in page
    data = _form(auth)
    without_token = {k: v for k, v in data.items() if k != "csrf_token"}
    assert client.post("/admin/tenants/reservations/new", data=without_token).status_code == 400
    assert _stored() == []
    made = client.post("/admin/tenants/reservations/new", data=data)
    assert made.status_code == 303 and made.location.endswith("/admin/tenants#reservations")
    [row] = _stored()
    assert (row.running_slots, row.queued_runs, row.reason, row.created_by) == (5, 200, "month-end close", "admin")
    # What was typed is UTC: stored as that very moment.
    assert row.starts_at.strftime("%Y-%m-%d %H:%M") == data["reserve-starts_at"]
    assert row.ends_at.strftime("%Y-%m-%d %H:%M") == data["reserve-ends_at"]
    [entry] = _audited()
    assert (entry.actor, entry.target_id, entry.after["running_slots"]) == ("admin", str(row.id), 5)
    page = _text(client.get("/admin/tenants"))
    assert f"Reserved 5 running slots and 200 queued runs for acme from {data['reserve-starts_at']}" in page
    assert f'id="reservation-{row.id}"' in page


@pytest.mark.parametrize(("fields", "status", "message"), [
    ({"running_slots": "60"}, 409, "over-reservation: between {start}:00+00:00 and {end}:00+00:00 up to 50 of the 100 "
                                   "running slots the system promises (REBOUND_CAPACITY_RUNNING) are reserved already "
                                   "(by globex); 50 are free then. Ask for at most 50 or choose another range."),
    ({"ends_at": "{start}"}, 422, "ends_at ({shown} UTC) must be after starts_at ({shown} UTC)"),
    ({"starts_at": "tomorrow"}, 422, "is a UTC time written YYYY-MM-DD HH:MM, e.g. 2026-12-01 14:05, or a date alone "
                                    "(2026-12-01)"),
    ({"starts_at": ""}, 422, "give the start, e.g. 2026-12-31 18:00"),
    ({"running_slots": "lots"}, 422, "running_slots must be a whole number from 1 to 100, got 'lots'"),
    ({"tenant": ""}, 422, "give the tenant's name"),
    ({"reason": " "}, 422, "give a reason of 1-255 characters (who needs the capacity, for what)"),
])
def test_a_refused_reservation_says_why_in_the_form_and_writes_nothing(client, auth, fields, status, message):
    make_tenant("acme")
    make_tenant("globex")
    _reserve("globex", 50, hours_from_now=0.5)  # over 0:30-4:30 from now: overlaps the form's 1:00-5:00
    auth.as_role("admin")
    data = _form(auth)
    start, end = data["reserve-starts_at"].replace(" ", "T"), data["reserve-ends_at"].replace(" ", "T")
    data.update({f"reserve-{k}": v.format(start=data["reserve-starts_at"]) for k, v in fields.items()})
    refused = client.post("/admin/tenants/reservations/new", data=data)
    assert refused.status_code == status
    assert _form_errors(refused) == [message.format(start=start, end=end, shown=data["reserve-starts_at"])]
    assert len(_stored()) == 1 and len(_audited()) == 1  # only globex's, made before
    assert 'value="month-end close"' in refused.get_data(as_text=True) or "reason" in fields  # what was typed stays


def test_an_empty_reservation_form_marks_every_field_it_lacks_at_once(client, auth):
    make_tenant("acme")
    auth.as_role("admin")
    data = {**_form(auth), "reserve-running_slots": "", "reserve-starts_at": "", "reserve-ends_at": "",
            "reserve-reason": ""}
    refused = client.post("/admin/tenants/reservations/new", data=data)
    assert refused.status_code == 422
    assert _form_errors(refused) == ["give the running slots to hold, e.g. 5", "give the start, e.g. 2026-12-31 18:00",
                                     "give the end, e.g. 2027-01-02 06:00",
                                     "give a reason: who needs the capacity, for what"]
    assert _stored() == []


def test_a_scoped_admin_reserves_only_for_its_own_tenant_within_its_quotas(client, auth):
    acme = make_tenant("acme")
    make_tenant("globex")
    tenants.set_quota(acme, BOSS, max_running=3)
    auth.make_user("ada", "admin", tenant=acme)
    assert auth.login("ada").status_code == 302
    page = client.get("/admin/tenants").get_data(as_text=True)
    form = page[page.index('id="reserve"'):]
    assert 'value="acme">acme</option>' in form and "globex" not in form
    over = client.post("/admin/tenants/reservations/new", data=_form(auth, running_slots="4"))
    assert over.status_code == 422
    assert _form_errors(over) == ["a reservation made by someone limited to tenant acme stays within its quotas "
                                  "(max_running 3, max_queued 10000); ask an admin of every tenant for more"]
    other = client.post("/admin/tenants/reservations/new", data=_form(auth, tenant="globex"))
    assert other.status_code == 403 and _form_errors(other) == ["you may reserve capacity only for tenant acme"]
    assert _stored() == []
    assert client.post("/admin/tenants/reservations/new", data=_form(auth, running_slots="3")).status_code == 303
    assert [(r.tenant_id, r.created_by) for r in _stored()] == [(acme.id, "ada")]


def test_only_admins_reserve(client, auth):
    make_tenant("acme")
    for role in ("operator", "approver", "manager"):
        auth.as_role(role)
        assert client.post("/admin/tenants/reservations/new", data=_form(auth)).status_code == 403
        client.post("/logout", data={"csrf_token": auth.csrf()})
    assert _stored() == []


def test_a_tenants_row_shows_what_it_has_reserved_now(client, auth):
    acme = make_tenant("acme")
    make_tenant("globex")
    tenants.set_quota(acme, BOSS, max_running=2)
    start = utcnow() - timedelta(minutes=1)
    reservations.create("acme", BOSS, running_slots=3, queued_runs=100, starts_at=start,
                        ends_at=start + timedelta(hours=2), reason="now")
    reservations.create("acme", BOSS, running_slots=4, queued_runs=50, starts_at=start,
                        ends_at=start + timedelta(hours=2), reason="also now")
    _reserve("acme", 20, hours_from_now=3, reason="later")  # not in force yet: not counted
    auth.as_role("admin")
    html = _text(client.get("/admin/tenants"))
    acme_row = html[html.index('id="tenant-acme"'):html.index('id="tenant-default"')]
    assert "7 running · 150 queued" in acme_row
    # While they hold, the quotas are at least what is reserved, as the claim and submit count them.
    assert "0 <span class=\"subtle\">of 7</span>" in acme_row and "of 10000" in acme_row
    globex_row = html[html.index('id="tenant-globex"'):html.index("</tr>", html.index('id="tenant-globex"'))]
    assert "running ·" not in globex_row
