"""An admin reserves capacity through the form on Admin → Tenants, in real Chromium against a real server."""

from datetime import timedelta

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Reservation
from tests.factories import make_tenant
from tests.helpers import browser_login

pytestmark = pytest.mark.browser


def _typed(hours: float) -> str:
    return (utcnow() + timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M")


def _reserve(page, tenant: str, slots: int, reason: str, start: float) -> None:
    form = page.locator("form[action$='/admin/tenants/reservations/new#reserve']")
    form.get_by_label("Tenant").select_option(tenant)
    form.get_by_label("Running slots").fill(str(slots))
    form.get_by_label("Queued runs").fill("500")
    form.get_by_label("Starts (UTC)").fill(_typed(start))
    form.get_by_label("Ends (UTC)").fill(_typed(9))
    form.get_by_label("Reason").fill(reason)
    form.get_by_role("button", name="Reserve").click()


def _stored() -> list[tuple[str, int, object]]:
    db.session.commit()
    db.session.expire_all()
    return db.session.execute(select(Reservation.reason, Reservation.running_slots, Reservation.cancelled_at)
                              .order_by(Reservation.id)).all()


def test_an_admin_reserves_capacity_is_refused_more_than_is_free_and_cancels(page, live_server, live_app, screenshot):
    make_tenant("acme")
    make_tenant("globex")
    capacity = live_app.config["CAPACITY_RUNNING"]
    base = live_server.url
    page.set_viewport_size({"width": 1440, "height": 900})
    browser_login(page, base, then="/admin/tenants")

    _reserve(page, "acme", capacity - 30, "month-end close", start=0)  # from this minute
    expect(page.locator(".flash.success")).to_contain_text(
        f"Reserved {capacity - 30} running slots and 500 queued runs for acme")
    assert _stored() == [("month-end close", capacity - 30, None)]
    expect(page.locator("table.reservations tbody tr", has_text="month-end close")).to_contain_text("acme")
    expect(page.locator("#tenant-acme .reserved-now")).to_have_text(f"{capacity - 30} running · 500 queued")
    expect(page.locator("#tenant-globex .reserved-now")).to_have_text("—")
    screenshot("reserve-form-reserved")

    # Over the capacity: the 409 comes back in the form, with what is free, and nothing is written.
    _reserve(page, "globex", 40, "quarter close", start=1)
    error = page.locator("#reserve + .panel .field-error")
    expect(error).to_contain_text("over-reservation: between")
    expect(error).to_contain_text("(by acme); 30 are free then. Ask for at most 30 or choose another range.")
    expect(page.locator("#reserve + .panel").get_by_label("Reason")).to_have_value("quarter close")  # kept
    assert len(_stored()) == 1
    screenshot("reserve-form-refused")

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("table.reservations tbody tr", has_text="month-end close").get_by_role("button", name="Cancel").click()
    expect(page.locator(".flash.success")).to_contain_text("Cancelled reservation")
    expect(page.locator("table.reservations")).to_contain_text("No capacity reserved now or later.")
    [(_, _, cancelled)] = _stored()
    assert cancelled is not None
