"""The DLQ's "Replay selected" and "Discard selected" ask about the rows ticked: how many, and which params fixes
waiting for approval on them the action closes; dismissing the question sends nothing."""

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from console.domain.clock import FrozenClock
from console.extensions import db
from console.models import Approval, DeadLetter, Run
from console.services.actor import Actor
from console.services.dlq.groups import replay_caution
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants, users
from console.services.recovery import params_fix
from console.services.system import console_settings
from tests.factories import BROKEN, LENIENT, Saga
from tests.helpers import browser_login

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")


def dead_letter() -> DeadLetter:
    """Drive a run to the DLQ with a non-retryable failure and return its dead letter."""
    run, _ = submit(tenants.find("default"), ARRANGE, handler="demo.flaky", params=BROKEN, policy=LENIENT)
    assert execute(run.id, 0) == "dead"
    return db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)).scalar_one()


@pytest.fixture
def letters(live_app):
    """Three open dead letters; a params fix waits for approval on the first two."""
    found = [dead_letter() for _ in range(3)]
    olga, _ = users.create("olga", "operator", None, ARRANGE)
    fixes = [params_fix.request_fix(letter.id, {"fail_times": 0}, "the account was reopened",
                                    Actor(olga.username, olga.id)) for letter in found[:2]]
    return found, fixes


def ask(page, button: str, answer: bool) -> str:
    """Click a bulk button, answer its question, and return the question."""
    asked = []

    def reply(dialog):
        asked.append(dialog.message)
        dialog.accept() if answer else dialog.dismiss()

    page.once("dialog", reply)
    page.get_by_role("button", name=button, exact=True).click()
    assert len(asked) == 1, "the button asked exactly once"
    return asked[0]


def tick(page, *letters: DeadLetter) -> None:
    for letter in letters:
        page.get_by_label(f"select dead letter {letter.id}", exact=True).check()


def test_the_selected_buttons_count_the_ticked_rows_and_name_their_waiting_fixes(page, live_server, letters):
    (first, second, plain), (fix_one, fix_two) = letters
    browser_login(page, live_server.url, then="/dlq/?view=list")

    tick(page, plain)
    assert ask(page, "Replay selected", answer=False) == (
        "Replay the selected dead letter at the rate set here? It failed for good, not by running out of retries: "
        "unless its cause was fixed, it fails again.")
    page.get_by_label("reason to discard the selected").fill("a duplicate")
    assert ask(page, "Discard selected", answer=False) == "Discard the selected dead letter? It will not be replayed."
    tick(page, first)
    assert ask(page, "Replay selected", answer=False) == (
        f"Replay the 2 selected dead letters at the rate set here? Params fix #{fix_one.id} waiting for approval is "
        "closed then. All of them failed for good, not by running out of retries: unless their cause was fixed, "
        "they fail again.")
    tick(page, second)
    page.get_by_label("reason to discard the selected").fill("duplicates of fulfilled orders")
    assert ask(page, "Discard selected", answer=False) == (
        f"Discard the 3 selected dead letters? They will not be replayed. Params fixes #{fix_one.id}, #{fix_two.id} "
        "waiting for approval are closed then.")
    # Dismissed, nothing was sent: the letters are open and the fixes wait.
    db.session.expire_all()
    assert {db.session.get(DeadLetter, letter.id).status for letter in (first, second, plain)} == {"open"}
    assert {db.session.get(Approval, fix.id).status for fix in (fix_one, fix_two)} == {"pending"}

    ask(page, "Discard selected", answer=True)
    expect(page.locator(f"#dl-{first.id}")).to_have_count(0)  # the open list no longer shows them
    db.session.expire_all()
    assert {db.session.get(DeadLetter, letter.id).status for letter in (first, second, plain)} == {"discarded"}
    assert {db.session.get(Approval, fix.id).status for fix in (fix_one, fix_two)} == {"superseded"}
    assert {run.status for run in db.session.execute(select(Run)).scalars()} == {"dead"}  # none was replayed


def test_a_discard_without_a_reason_asks_nothing_and_its_refusal_goes_once_the_discard_is_done(
        page, live_server, letters):
    """It asked "Discard …?" first and then refused for the missing reason, whose notice stayed beside the
    success of the next try."""
    (first, _, _), _ = letters
    browser_login(page, live_server.url, then="/dlq/?view=list")
    tick(page, first)
    asked = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.get_by_role("button", name="Discard selected", exact=True).click()
    refusal = page.locator("#bulk-area .dlq-notice")
    expect(refusal).to_contain_text("a reason is required")
    assert asked == []
    page.get_by_label("reason to discard the selected").fill("a duplicate")
    page.get_by_role("button", name="Discard selected", exact=True).click()
    expect(page.locator("#results .flash.success")).to_contain_text("Discarded 1 dead letter")
    expect(refusal).to_have_count(0)
    assert asked == ["Discard the selected dead letter? It will not be replayed. Params fix "
                     f"#{letters[1][0].id} waiting for approval is closed then."]


def test_discarding_more_than_the_limit_asks_to_file_a_request_and_discards_nothing(page, live_server, letters):
    (first, second, plain), _ = letters
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 2, ARRANGE)
    browser_login(page, live_server.url, then="/dlq/?view=list")
    tick(page, first, second)
    page.get_by_label("reason to discard the selected").fill("duplicates of fulfilled orders")
    assert ask(page, "Discard selected", answer=False).startswith("Discard the 2 selected dead letters?")
    tick(page, plain)
    assert ask(page, "Discard selected", answer=True).startswith(
        "Ask to discard the 3 selected dead letters? One person may discard 2 an hour without approval (2 left for "
        "you now): more wait for a second person with the approve permission, and nothing is discarded until they "
        "approve.")
    expect(page.get_by_role("link", name="request #", exact=False)).to_be_visible()
    db.session.expire_all()
    assert {db.session.get(DeadLetter, letter.id).status for letter in (first, second, plain)} == {"open"}
    assert db.session.execute(select(Approval).where(Approval.kind == "dlq.discard_bulk")).scalar_one().status == (
        "pending")


def test_replaying_workflows_steps_says_each_runs_alone_before_anything_is_sent(page, live_server, live_app):
    saga = Saga(FrozenClock())
    undone, stuck = saga.two_failed()
    failed = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == saga.run(undone, 3).id)).scalar_one()
    undo = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == saga.run(stuck, 2).id)).scalar_one()
    plain = dead_letter()
    browser_login(page, live_server.url, then="/dlq/?view=list")

    tick(page, undo)
    assert ask(page, "Replay selected", answer=False) == (
        "Replay the selected dead letter at the rate set here? It is a step of a workflow: a replay runs it alone, "
        "and its workflow does not go on from it. It had succeeded and its undo failed: a replay runs that step "
        "again, not its undo.")
    page.get_by_label(f"select dead letter {undo.id}", exact=True).uncheck()
    tick(page, plain, failed)
    assert ask(page, "Replay selected", answer=False) == (
        "Replay the 2 selected dead letters at the rate set here? One is a step of a workflow: a replay runs it alone, "
        "and its workflow does not go on from it. One of them failed for good, not by running out of retries: unless "
        "its cause was fixed, it fails again.")
    tick(page, undo)
    assert ask(page, "Replay selected", answer=False).endswith(
        " 2 are steps of workflows: a replay runs each alone, and its workflow does not go on from it. One of them had "
        "succeeded and its undo failed: a replay runs that step again, not its undo. One of them failed for good, not "
        "by running out of retries: unless its cause was fixed, it fails again.")
    page.get_by_label("reason to discard the selected").fill("handled by hand")
    discard = ask(page, "Discard selected", answer=False)
    assert discard == "Discard the 3 selected dead letters? They will not be replayed."

    # One row's own Replay asks too; dismissed, nothing moves; accepted, that step alone runs again.
    row = page.locator(f"#dl-{failed.id}")
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    row.get_by_role("button", name="Replay", exact=True).click()
    assert asked == [f"Replay dead letter #{failed.id} with its params as they are? Run #{failed.run_id} is step 3 of "
                     f"workflow #{undone} (compensating). A replay runs this step alone: the workflow does not go on "
                     "from it, and the steps its compensation undid stay undone. "
                     f"{replay_caution(failed.reason)}"]
    db.session.expire_all()
    assert db.session.get(DeadLetter, failed.id).status == "open"
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Replay", exact=True).click()
    expect(row.get_by_text(f"Replayed as series 2 of run {failed.run_id}")).to_be_visible()
    db.session.expire_all()
    assert db.session.get(DeadLetter, failed.id).status == "replayed"
    assert saga.status(undone) == "compensating"  # the workflow does not go on from its replayed step


def test_a_rows_own_replay_keeps_what_was_set_in_the_bulk_bar(page, live_server, letters):
    """The row's answer refreshes the count and, with it, the bulk bar: a rate of 7 went back to 50 and a typed
    reason was emptied, so the next "Replay selected" ran at 50 while its question said "the rate set here"."""
    found, _ = letters
    browser_login(page, live_server.url, then="/dlq/?view=list")
    tick(page, found[0], found[1])
    page.get_by_label("Rate").fill("7")
    page.get_by_label("or as fast as it safely can").check()
    page.get_by_label("reason to discard the selected").fill("carrier fixed, typed text")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#dl-{found[2].id}").get_by_role("button", name="Replay", exact=True).click()
    expect(page.locator("#dlq-count")).to_contain_text("2 open dead letters")  # the count read itself again
    expect(page.get_by_label("Rate")).to_have_value("7")
    expect(page.get_by_label("or as fast as it safely can")).to_be_checked()
    expect(page.get_by_label("reason to discard the selected")).to_have_value("carrier fixed, typed text")
    expect(page.get_by_label(f"select dead letter {found[0].id}", exact=True)).to_be_checked()
