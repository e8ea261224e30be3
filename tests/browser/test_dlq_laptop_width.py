"""The dead-letter tables at a 1024 px window: every row's action buttons stay in sight, in both views; and at 1024
and 960 px (half of a 1920 px screen) no column hides with a demo's mix of handlers and tenants."""

import pytest
from playwright.sync_api import expect

from console.domain.clock import FrozenClock, utcnow
from console.services.engine.execute import execute
from console.services.system.demo_reports import seed_report_history
from tests.factories import BROKEN, LENIENT, Runs, make_tenant
from tests.helpers import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.layout]
LAPTOP = {"width": 1024, "height": 768}
# Inside the visible part of its table's scrolling frame, and across inside the viewport: seen without scrolling
# the table or the page sideways.
IN_SIGHT = """el => {
  const box = el.getBoundingClientRect(), frame = el.closest('.table-wrap').getBoundingClientRect();
  return box.width > 0 && box.left >= Math.max(0, frame.left) && box.right <= Math.min(innerWidth, frame.right)
    && box.top >= frame.top && box.bottom <= frame.bottom;
}"""


@pytest.fixture
def dead_letters(live_app, clock):
    """Dead letters of two errors and two tenants, with messages as long as the demo's."""
    runs = Runs()
    make_tenant("acme-logistics")
    for n, (tenant, code, message) in enumerate([
            ("default", "http_502", "payments-gateway answered 502 for order 1000"),
            ("acme-logistics", "http_502", "payments-gateway answered 502 for order 1001"),
            ("acme-logistics", "invalid_account", "account 1002 is closed")]):
        run_id = runs.submit("demo.flaky", {**BROKEN, "code": code, "message": message}, policy=LENIENT,
                             tenant=tenant)
        assert execute(run_id, 0, clock=clock) == "dead", n


def actions_in_sight(page) -> dict[str, bool]:
    # A row's own buttons; the one inside Discard's box is checked once the box is open.
    controls = page.locator("td.actions > button, td.actions > form > button, td.actions > a.button, "
                            "td.actions > details > summary")
    expect(controls.first).to_be_visible()
    return {f"{n}: {control.inner_text()}": control.evaluate(IN_SIGHT) for n, control in enumerate(controls.all())}


def test_every_dead_letter_action_is_in_sight_at_1024_px(page, live_server, dead_letters):
    page.set_viewport_size(LAPTOP)
    browser_login(page, live_server.url)

    page.goto(f"{live_server.url}/dlq/")  # grouped
    assert all(actions_in_sight(page).values()), actions_in_sight(page)

    page.locator("button.expand").first.click()
    expect(page.locator("table.nested tr.dl-row").first).to_be_visible()
    assert all(actions_in_sight(page).values()), actions_in_sight(page)

    page.goto(f"{live_server.url}/dlq/?view=list")
    assert all(actions_in_sight(page).values()), actions_in_sight(page)
    last = page.locator("tr.dl-row").last
    last.get_by_text("Discard…").click()
    reason, discard = last.get_by_role("textbox"), last.get_by_role("button", name="Discard", exact=True)
    expect(reason).to_be_visible()
    assert reason.evaluate(IN_SIGHT) and discard.evaluate(IN_SIGHT)  # the last row's box opens upwards
    reason.fill("duplicate of an order already refunded")
    discard.click()
    expect(last).to_contain_text("discarded")


def test_no_dead_letter_column_hides_at_1024_or_960_px_with_a_demos_mix_of_handlers_and_tenants(page, live_server,
                                                                                                   live_app):
    make_tenant("acme"), make_tenant("globex")
    seed_report_history(1500, 14, 6)  # dead letters of five handlers (plugin and python) in three tenants
    # The demo's longest handler name: unbroken, it ran over the Work orders column of its group (helper 147).
    runs = Runs()
    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 9, "code": "undo_flaky"},
                         policy={**LENIENT, "max_attempts": 1})
    assert execute(run_id, 0, clock=FrozenClock(utcnow())) == "dead"
    browser_login(page, live_server.url)
    for width in (1024, 960):
        page.set_viewport_size({**LAPTOP, "width": width})
        for view in ("", "?view=list"):
            page.goto(f"{live_server.url}/dlq/{view}")
            expect(page.locator("#dlq .table-wrap").first).to_be_visible()
            overflow = page.evaluate("[...document.querySelectorAll('.table-wrap')]"
                                     ".map(frame => frame.scrollWidth - frame.clientWidth)")
            assert overflow == [0], (width, view, overflow)  # the work orders column too, not only the sticky actions
            spilled = page.evaluate("[...document.querySelectorAll('#dlq td .mono')].filter(name => "
                                    "name.scrollWidth > name.clientWidth + 1).map(name => name.innerText)")
            assert spilled == [], (width, view, spilled)  # no name runs over the next column


# The element a click at the middle of this one would reach: itself, not what covers or clips it.
CLICKABLE = "el => { const box = el.getBoundingClientRect(); " \
            "return document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2) === el; }"


def test_the_only_letters_discard_box_opens_where_it_can_be_used(page, live_server, live_app, clock):
    """A saga step's letter is often alone in its group: its Discard box opened under the row, inside a frame that
    clipped it, and could not be clicked (helper 148)."""
    runs = Runs()
    run_id = runs.submit("demo.flaky", {**BROKEN, "code": "carrier_rejected"}, policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    (letter,) = runs.dead_letters(run_id)
    page.set_viewport_size(LAPTOP)
    browser_login(page, live_server.url)
    page.goto(f"{live_server.url}/dlq/{letter.id}")
    row = page.locator(f"#dl-{letter.id}")
    row.get_by_text("Discard…").click()
    reason, discard = row.get_by_role("textbox"), row.get_by_role("button", name="Discard", exact=True)
    expect(reason).to_be_visible()
    assert reason.evaluate(CLICKABLE) and discard.evaluate(CLICKABLE)
    reason.click()
    page.keyboard.type("undid the shipment label by hand")
    discard.click()
    expect(row).to_contain_text("discarded")


def test_a_link_to_one_dead_letter_stops_its_row_below_the_sticky_header(page, live_server, live_app, clock):
    """/dlq/<id> lands on the row's anchor: the table's sticky header covered the top of the row it pointed at,
    its number and error code (helper 164)."""
    runs = Runs()
    ids = [runs.submit("demo.flaky", {**BROKEN, "message": f"account {n} is closed"}, policy=LENIENT)
           for n in range(30)]
    for run_id in ids:
        assert execute(run_id, 0, clock=clock) == "dead"
    middle = runs.dead_letters(ids[15])[0].id  # far down its group's list, with rows below it to scroll past
    page.set_viewport_size({"width": 1024, "height": 420})
    browser_login(page, live_server.url)
    page.goto(f"{live_server.url}/dlq/{middle}")
    row = page.locator(f"#dl-{middle}")
    expect(row).to_be_in_viewport()
    header = row.locator("xpath=ancestor::table[1]/thead//th[1]").bounding_box()  # the cell is sticky, not <thead>
    assert row.bounding_box()["y"] >= header["y"] + header["height"] - 1, (row.bounding_box(), header)


PHONE = {"width": 390, "height": 844}
# Across inside the viewport, and the topmost element at its middle is itself (not a pinned cell over it).
ON_SCREEN = """el => {
  const box = el.getBoundingClientRect();
  if (!(box.width > 0 && box.left >= 0 && box.right <= innerWidth)) return false;
  el.scrollIntoView({block: 'center'});
  const again = el.getBoundingClientRect(), top = document.elementFromPoint(again.left + again.width / 2,
                                                                             again.top + again.height / 2);
  return el === top || el.contains(top);
}"""


def test_on_a_phone_each_dead_letter_reads_as_a_card_with_its_error_and_buttons_on_screen(page, live_server,
                                                                                         dead_letters, screenshot):
    """At 390 px the tables were 879 px wide in their frame: the pinned buttons covered the error, and a group's
    count, times and tenants were off the screen (helper 164)."""
    page.set_viewport_size(PHONE)
    browser_login(page, live_server.url)
    for address, wanted in (("/dlq/?view=list", ("tr.dl-row td.err .code", "tr.dl-row td.err",
                                                 "tr.dl-row td.actions > form > button", "tr.dl-row td.status")),
                            ("/dlq/", ("tbody.group td.err .code", "tbody.group td.num a", "tbody.group td.where",
                                       "tbody.group td.actions button[name=group]"))):
        page.goto(f"{live_server.url}{address}")
        for selector in wanted:
            found = page.locator(selector).all()
            assert found and all(each.evaluate(ON_SCREEN) for each in found), (address, selector)
        assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth"), address
    page.locator("button.expand").first.click()  # the group's entries, cards inside its card
    expect(page.locator("table.nested tr.dl-row").first).to_be_visible()
    assert all(each.evaluate(ON_SCREEN) for each in page.locator("table.nested tr.dl-row td.err .code").all())
    screenshot("dlq-phone-cards")
