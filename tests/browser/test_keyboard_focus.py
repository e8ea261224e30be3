"""A keyboard user keeps their place: a live region's refresh, a row's own action, a refused field and a popover's
Escape each leave focus somewhere that makes sense, never on <body>."""

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from console.extensions import db
from console.models import DeadLetter
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from tests.factories import BROKEN, LENIENT, Runs
from tests.helpers import browser_login

pytestmark = pytest.mark.browser

COUNT_SWAPS = "() => { window.swaps = 0; document.addEventListener('htmx:afterSettle', () => { window.swaps += 1; }); }"


def dead_letter() -> DeadLetter:
    run, _ = submit(tenants.find("default"), Actor("arrange"), handler="demo.flaky", params=BROKEN, policy=LENIENT)
    assert execute(run.id, 0) == "dead"
    return db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)).scalar_one()


def focused(page) -> dict:
    return page.evaluate("() => { const e = document.activeElement;"
                         " return {tag: e.tagName, href: e.getAttribute('href'), text: e.textContent.trim()}; }")


def test_the_overviews_refresh_leaves_focus_on_the_link_it_was_on(page, live_server, live_app):
    dead_letter()
    browser_login(page, live_server.url, then="/overview")
    page.evaluate(COUNT_SWAPS)
    link = page.locator("#live a[href]").last
    link.focus()
    before = focused(page)
    assert before["tag"] == "A"
    page.wait_for_function("() => window.swaps >= 1", timeout=20_000)  # the region refreshes every 5 s
    after = focused(page)
    assert (after["tag"], after["href"]) == ("A", before["href"])
    assert page.evaluate("() => document.getElementById('live').contains(document.activeElement)")


def test_a_rows_replay_by_keyboard_lands_on_its_answer_and_a_refused_close_on_the_note(page, live_server, live_app):
    letter = dead_letter()
    browser_login(page, live_server.url, then="/dlq/?view=list")
    row = page.locator(f"#dl-{letter.id}")

    # Opening a row's Discard… popover puts focus in its reason box (it stayed on the summary); Escape closes it and
    # gives focus back to its button.
    row.locator("summary", has_text="Discard…").focus()
    page.keyboard.press("Enter")
    expect(row.get_by_label(f"reason to discard dead letter {letter.id}")).to_be_focused()
    page.keyboard.press("Escape")
    expect(row.get_by_label(f"reason to discard dead letter {letter.id}")).to_be_hidden()
    expect(row.locator("summary", has_text="Discard…")).to_be_focused()

    row.get_by_role("button", name="Replay", exact=True).focus()
    page.once("dialog", lambda dialog: dialog.accept())  # it failed for good: the replay asks first
    page.keyboard.press("Enter")
    notice = page.locator(f"#dl-{letter.id} [role=status]")
    expect(notice).to_contain_text("Replayed")
    expect(notice).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text(f"run {letter.run_id} →")

    # A note of spaces is refused at its box: focus goes to the box, which names the error.
    page.goto(f"{live_server.url}/workorders/{letter.work_order_id}")
    note = page.locator("textarea#close-note")
    note.fill("   ")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Close work order").focus()
    page.keyboard.press("Enter")
    expect(note).to_have_attribute("aria-invalid", "true")
    expect(note).to_be_focused()
    expect(page.locator("#close-note-error")).to_contain_text("say what was done")


def runs_listed(page, live_server, count: int) -> tuple[Runs, list[int]]:
    """Submit `count` runs and open the Runs list on a laptop's window; return the factory and their ids."""
    runs = Runs()
    ids = [runs.submit(params={"n": n}) for n in range(count)]
    page.set_viewport_size({"width": 1280, "height": 720})
    browser_login(page, live_server.url, then="/runs/")
    return runs, ids


def ten_more_arrive(page, runs: Runs, after: int) -> None:
    """Submit ten runs and wait for the list's live refresh to show the newest on top."""
    newer = [runs.submit(params={"n": n}) for n in range(after, after + 10)]
    expect(page.locator("#results table.runs tbody tr").first.locator("a").first).to_have_text(str(newer[-1]),
                                                                                               timeout=20_000)


def test_a_runs_refresh_that_pushes_the_focused_row_off_the_page_keeps_focus_in_the_table(page, live_server,
                                                                                           live_app):
    runs, ids = runs_listed(page, live_server, 50)
    forty_fifth = page.locator("#results table.runs tbody tr").nth(44).locator("a").first
    expect(forty_fifth).to_have_text(str(ids[5]))  # newest first
    forty_fifth.focus()
    scrolled = page.evaluate("() => window.scrollY")
    assert scrolled > 1000

    # Ten new runs push it (and the five below it) past the page's 50: it has no twin in the new table.
    ten_more_arrive(page, runs, 50)
    # Focus went to its nearest neighbour still shown, the page's last run (the four above it went too), not to a
    # count in the top bar (and the page, after it, to the top).
    expect(page.locator(":focus")).to_have_attribute("href", f"/runs/{ids[10]}")
    assert abs(page.evaluate("() => window.scrollY") - scrolled) < 100  # the browser's scroll anchoring moves it a row


def test_a_runs_refresh_that_adds_rows_above_the_focused_one_keeps_it_where_it_was_on_screen(page, live_server,
                                                                                            live_app):
    # Ten new runs on top pushed the focused row below the window (focus stayed on it, out of sight; helper 141).
    runs, ids = runs_listed(page, live_server, 20)
    link = page.locator(f'#results table.runs a[href="/runs/{ids[9]}"]')
    link.focus()
    top = link.bounding_box()["y"]
    assert 300 < top < 720
    ten_more_arrive(page, runs, 20)
    expect(page.locator(":focus")).to_have_attribute("href", f"/runs/{ids[9]}")
    assert abs(page.locator(":focus").bounding_box()["y"] - top) < 5


def test_focus_is_back_before_the_next_task_after_a_refresh_even_while_a_chart_redraws(page, live_server, live_app):
    # It came back on a timer after the swap's settle (20 ms) and after the Overview's charts redrew (up to 0.85 s):
    # a Tab pressed meanwhile left from <body> and skipped the cards (helper 168).
    dead_letter()
    browser_login(page, live_server.url, then="/overview")
    assert page.locator("#live [data-figure]").count() >= 1
    page.evaluate("""() => { window.seen = [];
      document.addEventListener('htmx:afterSwap', () => {
        setTimeout(() => window.seen.push(document.activeElement.tagName), 0); }); }""")
    page.locator("#live a[href]").last.focus()
    page.wait_for_function("() => window.seen.length >= 1", timeout=20_000)  # the region refreshes every 5 s
    assert page.evaluate("() => window.seen")[0] == "A"


def test_hide_gives_focus_to_the_groups_toggle_and_a_popover_closes_when_tabbed_out_of(page, live_server, live_app):
    letter = dead_letter()
    browser_login(page, live_server.url, then="/dlq/")
    toggle = page.locator("button[data-fold]").first
    toggle.focus()
    page.keyboard.press("Enter")
    hide = page.get_by_role("button", name="Hide")
    expect(hide).to_be_visible()
    hide.focus()
    page.keyboard.press("Enter")
    expect(toggle).to_be_focused()  # it went to <body> with the entries
    expect(toggle).to_have_attribute("aria-expanded", "false")

    letter = dead_letter()  # the newest, on top: the first letter's row below it takes the Tab
    page.goto(f"{live_server.url}/dlq/?view=list")
    row = page.locator(f"#dl-{letter.id}")
    row.locator("summary", has_text="Discard…").focus()
    page.keyboard.press("Enter")
    reason = row.get_by_label(f"reason to discard dead letter {letter.id}")
    expect(reason).to_be_focused()
    for _ in range(4):  # the box's own button, then on past it
        page.keyboard.press("Tab")
        if not page.evaluate("() => !!document.activeElement.closest('details[data-popover]')"):
            break
    expect(reason).to_be_hidden()  # left open, it covered the next row's buttons
