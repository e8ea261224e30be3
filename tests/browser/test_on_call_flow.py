"""The on-call engineer's path, by links only: Overview → dead letter → traceback → Replay → succeeded; and a DLQ
address shared in the incident channel shows the same filtered view, its group open, to whoever opens it."""

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import DeadLetter, Run
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.policies import versions as policies
from tests.helpers import browser_login

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")


def dead_run(message: str, code: str = "flaky") -> tuple[int, DeadLetter]:
    """Drive a run that fails its first three executions (logging as it goes) to the DLQ; a replay recovers it."""
    clock = FrozenClock(utcnow() - timedelta(minutes=2))
    run, _ = submit(tenants.find("default"), ARRANGE, handler="demo.flaky", policy="on-call",
                    params={"fail_times": 3, "code": code, "message": message,
                            "log": ["posting invoice to the ledger", "ledger answered 423 Locked"]})
    for attempt in range(3):
        execute(run.id, attempt, clock=clock)
        clock.advance(5)
    assert db.session.get(Run, run.id).status == "dead"
    return run.id, db.session.execute(db.select(DeadLetter).where(DeadLetter.run_id == run.id)).scalar_one()


@pytest.fixture
def arranged(live_app):
    policies.save("on-call", {"max_attempts": 3, "base_delay_s": 1, "multiplier": 2, "jitter": 0,
                              "breaker": {"failure_threshold": 100}}, ARRANGE)
    lone = dead_run("ledger lock timeout for invoice 771")
    group = [dead_run(f"carrier api down for parcel {n}", code="carrier_down") for n in (11, 12, 13)]
    return {"lone": lone, "group": group}


def test_overview_to_traceback_to_replay_to_succeeded_by_links(page, live_server, arranged, live_worker,
                                                                screenshot):
    run_id, letter = arranged["lone"]
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_login(page, live_server.url)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    screenshot("oncall-1-overview")

    page.locator("tr.dl-link").get_by_role("link", name=str(letter.id), exact=True).click()
    expect(page).to_have_url(re.compile(rf"/dlq/\?view=list&group={letter.fingerprint}#dl-{letter.id}$"))
    row = page.locator(f"#dl-{letter.id}")
    expect(row).to_contain_text("invoice 771")
    screenshot("oncall-2-dead-letter")

    row.get_by_role("link", name=f"run {run_id}", exact=True).click()
    expect(page.get_by_role("heading", name=re.compile(f"Run #{run_id}"))).to_be_visible()
    folded = page.locator("details.diagnostics")
    expect(folded).to_have_count(3)  # one per failed attempt
    last = folded.last
    expect(last.locator("pre.traceback")).not_to_be_visible()  # folded until asked
    last.locator("summary").click()
    expect(last.locator("pre.traceback")).to_contain_text("RetryableError")
    expect(last.locator("pre.traceback")).to_contain_text("ledger lock timeout for invoice 771")
    expect(last.locator("pre.log-lines")).to_contain_text("ledger answered 423 Locked")
    screenshot("oncall-3-traceback")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Replay", exact=True).click()
    expect(page.locator("#run-detail h1")).to_contain_text("succeeded", timeout=30_000)  # live refresh, real worker
    screenshot("oncall-4-succeeded")
    assert errors == []


def test_a_letter_replayed_in_its_row_follows_its_run_to_the_end_without_a_reload(page, live_server, arranged,
                                                                                   live_worker):
    """Its row read "series 2 pending … 0 s ago" for good while the run succeeded (helper 142)."""
    run_id, letter = arranged["lone"]
    browser_login(page, live_server.url)
    page.goto(f"{live_server.url}/dlq/{letter.id}")
    row = page.locator(f"#dl-{letter.id}")
    row.get_by_role("button", name="Replay", exact=True).click()
    expect(row).to_contain_text(f"Replayed as series 2 of run {run_id}")
    expect(row.locator(".replays")).to_contain_text("succeeded", timeout=30_000)  # its run, read again every 3 s
    expect(row.locator(".replays[hx-get]")).to_have_count(0)  # ended: it stops asking


def test_a_shared_dlq_address_reproduces_the_filtered_view(page, live_server, arranged, screenshot):
    fingerprint = arranged["group"][0][1].fingerprint
    shared = f"{live_server.url}/dlq/?code=carrier_down&open={fingerprint}"
    browser_login(page, live_server.url)
    page.goto(shared)
    expect(page.locator("#dlq-code")).to_have_value("carrier_down")
    expect(page.locator("#dlq-count")).to_contain_text("3 open dead letters match the filter")
    entries = page.locator(f"#ge-{fingerprint} tr.dl-row")
    expect(entries).to_have_count(3)  # the group is open, as it was for the person who shared it
    expect(page.locator("tbody.group")).to_have_count(1)  # invoice 771 is filtered out
    screenshot("oncall-5-shared-dlq")

    # Closing and opening the group moves the address; Back brings the open group back.
    expand = page.locator(f"#group-{fingerprint} button.expand")
    expand.click()
    expect(page).to_have_url(f"{live_server.url}/dlq/?code=carrier_down")
    expect(entries).to_have_count(0)
    page.go_back()
    expect(page).to_have_url(shared)
    expect(page.locator(f"#ge-{fingerprint} tr.dl-row")).to_have_count(3)  # without a reload (helper 164)
    # A filter typed, then Back: the box says the filter the rows show (it kept the typed one, and the next key
    # sent it with the restored rows' other filters; helper 164).
    page.locator("#dlq-code").fill("ledger_lock")
    expect(page).to_have_url(re.compile(r"code=ledger_lock"))
    expect(page.locator("#dlq-count")).to_contain_text("0 open dead letters match")
    page.go_back()
    expect(page).to_have_url(shared)
    expect(page.locator("#dlq-code")).to_have_value("carrier_down")

    # A row's replay lowers the open count at once, with its group's count and every Replay button's.
    page.locator(f"#ge-{fingerprint} tr.dl-row").first.get_by_role("button", name="Replay").click()
    expect(page.locator("#dlq-count")).to_contain_text("2 open dead letters match the filter")
    header = page.locator(f"#gh-{fingerprint}")
    expect(header.locator("td.num")).to_have_text("2")
    expect(header.get_by_role("button", name="Replay 2")).to_be_visible()
    expect(page.locator("#dlq-bulk").get_by_role("button", name="Replay all 2 matching")).to_be_visible()
    expect(entries).to_have_count(3)  # the group stays open, the replayed row saying what became of it

    # Replaying the last two leaves nothing to replay: the bulk bar goes with them (its "Replay all 1 matching"
    # stayed, and answered a 422 when pressed).
    for left in (1, 0):
        entries.get_by_role("button", name="Replay", exact=True).first.click()
        expect(page.locator("#dlq-count")).to_contain_text(
            f"{left} open dead letter{'s' if left != 1 else ''} match")
    expect(page.locator("#dlq-bulk").get_by_role("button")).to_have_count(0)


def test_a_group_opened_by_its_toggle_still_says_so_after_a_replay_in_it(page, live_server, arranged):
    """The header's refresh came from the page's first address (no group open): it said "collapsed" over the open
    entries, and the next press fetched them again instead of folding them (helper 117)."""
    fingerprint = arranged["group"][0][1].fingerprint
    browser_login(page, live_server.url, then="/dlq/")
    expand = page.locator(f"#group-{fingerprint} button.expand")
    expect(expand).to_have_accessible_name(re.compile(r"^the newest entries of group carrier_down “"))
    expand.click()
    entries = page.locator(f"#ge-{fingerprint} tr.dl-row")
    expect(entries).to_have_count(3)
    entries.first.get_by_role("button", name="Replay", exact=True).click()
    expect(page.locator(f"#gh-{fingerprint} td.num")).to_have_text("2")  # the header read itself again
    expect(expand).to_have_attribute("aria-expanded", "true")
    expand.click()
    expect(entries).to_have_count(0)  # one press folds it
    expect(expand).to_have_attribute("aria-expanded", "false")
