"""Bulk discards: up to the admin-set number they happen at once; above it they wait for a second person."""

from datetime import timedelta

import pytest
from sqlalchemy import select

from console.extensions import db
from console.models import Approval, AuditEntry, DeadLetter, WorkOrder
from console.services.actor import Actor
from console.services.delivery import notice
from console.services.dlq import discards
from console.services.dlq import groups as dlq
from console.services.engine import control
from console.services.engine.execute import execute
from console.services.errors import Conflict, Forbidden, InvalidInput, NotFound
from console.services.people import users
from console.services.recovery import bulk_discard, decisions, params_fix, shown
from console.services.system import console_settings
from console.services.workorders import changes as workorders
from tests.factories import make_tenant

LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}
BROKEN = {"fail_times": 9, "error": "fatal", "code": "bad_account", "message": "account 42 is closed"}
THRESHOLD = console_settings.DISCARD_WITHOUT_APPROVAL


@pytest.fixture
def letters(runs, clock):
    """Make `count` real dead letters (runs that failed for good) in a tenant."""

    def make(count: int, tenant: str = "default") -> list[DeadLetter]:
        made = []
        for _ in range(count):
            run_id = runs.submit("demo.flaky", BROKEN, policy=LENIENT, tenant=tenant)
            assert execute(run_id, 0, clock=clock) == "dead"
            made.extend(runs.dead_letters(run_id))
        return made

    return make


def statuses(found: list[DeadLetter]) -> list[str]:
    db.session.expire_all()
    return [db.session.get(DeadLetter, letter.id).status for letter in found]


def audited(action: str) -> list[AuditEntry]:
    db.session.expire_all()
    return db.session.execute(select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.seq)
                              ).scalars().all()


def test_the_threshold_defaults_to_ten_and_an_admin_sets_it_audited(app, staff, clock):
    assert bulk_discard.threshold() == 10
    with pytest.raises(InvalidInput, match="from 0 to 500"):
        console_settings.save(THRESHOLD, 501, staff["alex"], clock)
    with pytest.raises(InvalidInput, match="whole number"):
        console_settings.save(THRESHOLD, "ten", staff["alex"], clock)
    assert console_settings.save(THRESHOLD, " 2 ", Actor("root", None), clock) == 2
    assert console_settings.save(THRESHOLD, 3, Actor("root", None), clock) == 3  # the second save updates the row
    assert bulk_discard.threshold() == 3
    entries = audited("setting.update")
    assert [(e.before, e.after) for e in entries] == [({"value": 10}, {"value": 2}), ({"value": 2}, {"value": 3})]


def test_at_or_below_the_threshold_a_bulk_discard_is_immediate(staff, letters, clock):
    console_settings.save(THRESHOLD, 2, Actor("root"), clock)
    found = letters(2)
    outcome = bulk_discard.discard([x.id for x in found], "test orders", staff["olga"], None, clock)
    assert (outcome.discarded, outcome.skipped, outcome.approval) == (2, 0, None)
    assert statuses(found) == ["discarded", "discarded"]
    assert db.session.execute(select(Approval)).first() is None


def test_above_the_threshold_a_bulk_discard_becomes_a_request_that_changes_nothing_yet(staff, letters, clock):
    console_settings.save(THRESHOLD, 2, Actor("root"), clock)
    found = letters(3)
    ids = [x.id for x in found]
    with pytest.raises(InvalidInput, match="reason"):
        bulk_discard.discard(ids, " ", staff["olga"], None, clock)
    outcome = bulk_discard.discard(ids + [999_999], "test orders from the load test", staff["olga"], None, clock)
    request = outcome.approval
    assert (outcome.discarded, outcome.skipped, outcome.threshold) == (0, 1, 2)  # the unknown id is not asked for
    assert (request.kind, request.status, request.reason) == ("dlq.discard_bulk", "pending",
                                                              "test orders from the load test")
    assert request.payload["ids"] == ids and request.tenant_id == found[0].tenant_id
    assert request.before == {"dead_letters": {str(i): "open" for i in ids}}
    assert request.after == {"dead_letters": {str(i): "discarded" for i in ids}}
    assert statuses(found) == ["open"] * 3 and not audited("dead_letter.discard")


def test_the_limit_counts_what_the_person_discarded_in_the_last_hour(staff, letters, clock):
    console_settings.save(THRESHOLD, 4, Actor("root"), clock)
    found = letters(9)
    ids = [x.id for x in found]
    assert bulk_discard.allowance(staff["olga"], clock()) == 4
    assert bulk_discard.discard(ids[:3], "junk", staff["olga"], None, clock).discarded == 3
    clock.advance(600)
    # Split into small discards, one person's 4 an hour went to 20 (helper 93): the second of these is a request.
    assert bulk_discard.allowance(staff["olga"], clock()) == 1
    outcome = bulk_discard.discard(ids[3:5], "junk", staff["olga"], None, clock)
    assert (outcome.discarded, outcome.discarded_lately) == (0, 3) and outcome.approval.payload["ids"] == ids[3:5]
    assert bulk_discard.over_the_limit(2, outcome) == ("You discarded 3 dead letters in the last hour; discarding "
                                                       "2 dead letters more makes 5,")
    # What an approval let them discard is not theirs alone: it leaves their allowance as it was.
    decisions.approve(outcome.approval.id, staff["alex"], clock=clock)
    assert bulk_discard.allowance(staff["olga"], clock()) == 1
    # Another person has their own hour; and an hour after, the first person's discards no longer count.
    assert bulk_discard.discard(ids[5:9], "junk", staff["bea"], None, clock).discarded == 4
    clock.advance(3001)
    assert bulk_discard.allowance(staff["olga"], clock()) == 4


@pytest.mark.parametrize("reason", ["approved by myself", "cleanup · approved by petra, request #9"])
def test_a_reason_that_reads_like_an_approval_counts_against_the_allowance_as_any(staff, letters, clock, reason):
    """The allowance left out rows whose note read "approved by": a reason typed so discarded 11 letters of 9 one at
    a time, and the bulk bar still said 9 left (helper 149)."""
    console_settings.save(THRESHOLD, 4, Actor("root"), clock)
    found = letters(5)
    for letter in found[:4]:
        discards.discard(letter, reason, staff["olga"], clock)
    assert bulk_discard.allowance(staff["olga"], clock()) == 0
    outcome = bulk_discard.discard([found[4].id], reason, staff["olga"], None, clock)
    assert (outcome.discarded, outcome.discarded_lately) == (0, 4) and outcome.approval is not None


def test_an_approved_bulk_discard_closes_those_still_open_and_rolls_back(staff, letters, clock, runs):
    console_settings.save(THRESHOLD, 2, Actor("root"), clock)
    found = letters(4)
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    with pytest.raises(Forbidden):
        decisions.approve(request.id, staff["olga"], clock=clock)  # an operator: no approve permission
    control.replay(dlq.get(found[1].id), staff["bea"], clock)  # settled another way meanwhile
    clock.advance(60)

    approved = decisions.approve(request.id, staff["alex"], "they are duplicates", clock=clock)
    assert approved.status == "executed"
    assert statuses(found) == ["discarded", "replayed", "discarded", "discarded"]
    assert approved.backup["ids"] == [found[0].id, found[2].id, found[3].id]
    assert approved.backup["skipped"] == [found[1].id]
    entries = audited("dead_letter.discard")
    assert [e.target_id for e in entries] == [str(found[i].id) for i in (0, 2, 3)]
    # The requester's change, the approver beside them (as a runbook's).
    assert {(e.actor, e.note) for e in entries} == {
        ("olga", f"duplicates · approved by alex, request #{request.id}")}
    assert db.session.get(DeadLetter, found[0].id).resolved_by == f"olga (approved by alex, request #{request.id})"
    # The decision's audit row and the request's outcome say what was done, not what was asked.
    [approval_row] = audited("approval.approve")
    done = {str(found[i].id): "discarded" for i in (0, 2, 3)}
    assert approval_row.after["change"] == {"dead_letters": done}
    assert approved.outcome == approval_row.after["outcome"] == "discarded 3 dead letters; 1 was no longer open"

    rolled = decisions.rollback(request.id, staff["bea"], "they were not duplicates", clock=clock)
    assert rolled.status == "rolled_back"
    assert statuses(found) == ["open", "replayed", "open", "open"]
    assert [e.target_id for e in audited("dead_letter.reopen")] == [str(found[i].id) for i in (0, 2, 3)]
    letter = db.session.get(DeadLetter, found[0].id)
    assert (letter.resolved_at, letter.resolved_by, letter.resolution_note) == (None, None, None)
    with pytest.raises(Conflict):
        decisions.rollback(request.id, staff["bea"], clock=clock)


def test_rollback_reopens_only_the_letters_this_request_discarded(staff, letters, clock):
    console_settings.save(THRESHOLD, 1, Actor("root"), clock)
    found = letters(2)
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    decisions.approve(request.id, staff["alex"], clock=clock)
    # One of them was reopened and discarded again by other means since: this rollback leaves that discard alone.
    db.session.execute(db.update(DeadLetter).where(DeadLetter.id == found[0].id).values(
        resolved_at=clock() + timedelta(minutes=5), resolved_by="someone"))
    db.session.commit()
    decisions.rollback(request.id, staff["bea"], clock=clock)
    assert statuses(found) == ["discarded", "open"]
    [rollback_row] = audited("approval.rollback")  # it names the letter it reopened, not both the request named
    assert (rollback_row.before, rollback_row.after) == ({"dead_letters": {str(found[1].id): "discarded"}},
                                                         {"dead_letters": {str(found[1].id): "open"}})


def fix_closed_by_an_approved_discard(staff, letters, clock) -> tuple[list[DeadLetter], int, Approval]:
    """Two letters, a params fix waiting on the first, and an approved bulk discard of both (which closed the fix)."""
    console_settings.save(THRESHOLD, 1, Actor("root"), clock)
    found = letters(2)
    fix = params_fix.request_fix(found[0].id, {**BROKEN, "fail_times": 0}, "account reopened", staff["olga"],
                                 clock=clock).id
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    decisions.approve(request.id, staff["alex"], clock=clock)
    return found, fix, request


def test_rollback_puts_back_to_waiting_the_params_fix_the_discard_closed(staff, letters, clock):
    """The fix closed as "nothing left to fix" stayed closed after its letter was opened again, and no page told its
    requester to file it again (helper 158)."""
    found, fix, request = fix_closed_by_an_approved_discard(staff, letters, clock)
    assert db.session.get(Approval, fix).status == "superseded"
    clock.advance(60)
    decisions.rollback(request.id, staff["bea"], clock=clock)
    restored = db.session.get(Approval, fix)
    assert (restored.status, restored.decided_at, restored.outcome) == ("pending", None, None)
    [row] = audited("approval.restore")
    assert (row.target_id, row.actor, row.after) == (str(fix), "bea", {"status": "pending"})
    assert row.note == f"rollback of approval #{request.id}: dead letter {found[0].id} is open again"
    [rollback_row] = audited("approval.rollback")
    assert rollback_row.after["params_fixes"] == {str(fix): "pending"}
    assert decisions.approve(fix, staff["alex"], clock=clock).status == "executed"


def test_a_fix_past_its_time_stays_closed_after_the_rollback_and_says_its_letter_is_open_again(app, staff, letters,
                                                                                               clock):
    found, fix, request = fix_closed_by_an_approved_discard(staff, letters, clock)
    clock.advance(app.config["APPROVAL_TTL_S"] + 60)
    decisions.rollback(request.id, staff["bea"], clock=clock)
    closed = db.session.get(Approval, fix)
    assert closed.status == "superseded" and not audited("approval.restore")
    # The rollback says so: "the rows are as they were before it ran" was not true of the fix (helper 167).
    assert decisions.rolled_back_in_part(db.session.get(Approval, request.id)) == (
        f"params fix #{fix} stays closed: past its time to be decided, or another fix of the letter waits; file a "
        "new one if it is still needed")
    assert closed.outcome.endswith(f"dead letter {found[0].id} was opened again since (rollback of approval "
                                   f"#{request.id}): file a new fix if it still needs one")


def test_an_approved_bulk_discard_with_nothing_left_open_fails_clearly(staff, letters, clock):
    console_settings.save(THRESHOLD, 1, Actor("root"), clock)
    found = letters(2)
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    discards.discard_many([x.id for x in found], "by hand", staff["bea"], None, clock)
    with pytest.raises(Conflict, match="could not be made"):
        decisions.approve(request.id, staff["alex"], clock=clock)
    failed = db.session.get(Approval, request.id)
    assert failed.status == "failed" and "still open" in failed.outcome


def test_a_request_across_tenants_is_for_unscoped_approvers_only(app, staff, letters, clock):
    console_settings.save(THRESHOLD, 1, Actor("root"), clock)
    acme = make_tenant("acme")
    scoped, _ = users.create("sam", "approver", "correct-horse-battery", Actor("test"), tenant=acme)
    mixed = letters(1) + letters(1, tenant="acme")
    request = bulk_discard.discard([x.id for x in mixed], "cleanup", staff["olga"], None, clock).approval
    assert request.tenant_id is None
    with pytest.raises(NotFound):
        decisions.approve(request.id, Actor("sam", scoped.id), tenant_id=acme.id, clock=clock)
    own = letters(2, tenant="acme")
    theirs = bulk_discard.discard([x.id for x in own], "cleanup", staff["olga"], acme.id, clock).approval
    assert theirs.tenant_id == acme.id
    assert decisions.approve(theirs.id, Actor("sam", scoped.id), tenant_id=acme.id, clock=clock).status == "executed"


def test_rollback_leaves_discarded_a_letter_whose_run_was_retried_since(staff, letters, clock, runs):
    console_settings.save(THRESHOLD, 1, Actor("root"), clock)
    found = letters(2)
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    decisions.approve(request.id, staff["alex"], clock=clock)
    control.retry_now(runs.get(found[0].run_id), staff["bea"], clock=clock)  # its run is no longer dead
    rolled = decisions.rollback(request.id, staff["bea"], "not duplicates", clock=clock)
    assert statuses(found) == ["discarded", "open"]  # no open letter for a run that is not dead
    # Said where the request's page, the API and the audit log read it: "the rows are as they were" was untrue.
    left = (f"1 dead letter reopened; #{found[0].id} stays as now: settled another way since the discard, or its run "
            "was retried")
    assert decisions.rolled_back_in_part(rolled) == left
    assert rolled.outcome == f"discarded 2 dead letters; rolled back in part: {left}"
    assert audited("approval.rollback")[0].note == f"not duplicates · {left}"


def test_rolling_back_an_approved_discard_opens_the_work_order_it_closed_again(staff, letters, clock, runs):
    console_settings.save(THRESHOLD, 2, Actor("root"), clock)
    found = letters(3)  # one error group, one work order
    order_id = found[0].work_order_id
    workorders.acknowledge(db.session.get(WorkOrder, order_id), staff["olga"], clock=clock)
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    decisions.approve(request.id, staff["alex"], clock=clock)
    assert workorders.close_settled(clock=clock) == [order_id]  # every letter discarded: it closed itself
    notices_before = len(runs.outbox("workorder"))

    decisions.rollback(request.id, staff["bea"], "not duplicates after all", clock=clock)
    assert statuses(found) == ["open"] * 3
    # It closed only because these letters were settled: with them open again, so is it, as it was (the rows as
    # they were before the request ran), not a second order beside a closed one that lost its letters.
    assert {db.session.get(DeadLetter, x.id).work_order_id for x in found} == {order_id}
    order = db.session.get(WorkOrder, order_id)
    assert (order.status, order.dead_letter_count, order.assignee_id) == ("acknowledged", 3, staff["olga"].id)
    assert (order.closed_at, order.closed_by, order.close_note) == (None, None, None)
    assert db.session.execute(select(WorkOrder.id)).scalars().all() == [order_id]
    assert len(runs.outbox("workorder")) == notices_before  # the work-order system already has it
    [alert] = [m for m in runs.outbox("alert") if m.payload.get("work_order_id") == order_id]
    assert alert.payload["reopened"] == 3 and alert.payload["approval_id"] == request.id
    told = notice.build(alert)
    assert told.title.startswith("Dead letters reopened: python:demo.flaky — bad_account")
    assert told.summary.startswith(f"3 dead letters reopened by the rollback of request #{request.id}")
    assert told.incident_key == f"rebound-workorder-{order_id}"  # the incident its close resolved, paged again
    [reopened] = audited("work_order.reopen")
    assert (reopened.target_id, reopened.actor, reopened.after["status"]) == (str(order_id), "bea", "acknowledged")
    assert not audited("work_order.open")
    assert {e.after["work_order_id"] for e in audited("dead_letter.reopen")} == {order_id}
    assert workorders.close_settled(clock=clock) == []  # open letters: it stays open


def test_a_work_order_a_person_closed_stays_closed_and_the_reopened_letters_get_a_new_one(staff, letters, clock,
                                                                                           runs):
    console_settings.save(THRESHOLD, 2, Actor("root"), clock)
    found = letters(3)
    order_id = found[0].work_order_id
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    decisions.approve(request.id, staff["alex"], clock=clock)
    workorders.close(db.session.get(WorkOrder, order_id), "cleaned up by hand", staff["olga"], clock=clock)
    notices_before = len(runs.outbox("workorder"))

    decisions.rollback(request.id, staff["bea"], "not duplicates after all", clock=clock)
    reopened = {db.session.get(DeadLetter, x.id).work_order_id for x in found}
    assert len(reopened) == 1 and reopened != {order_id}  # a person's close is theirs to undo, not a rollback's
    order = db.session.get(WorkOrder, reopened.pop())
    assert (order.status, order.fingerprint, order.dead_letter_count) == ("open", found[0].fingerprint, 3)
    assert db.session.get(WorkOrder, order_id).status == "closed"
    assert len(runs.outbox("workorder")) == notices_before + 1  # the work-order system hears of it
    [opened] = audited("work_order.open")
    assert (opened.target_id, opened.actor) == (str(order.id), "bea") and f"#{order_id}" in opened.note


def test_a_reopened_letter_joins_its_groups_open_work_order(staff, letters, clock, runs):
    console_settings.save(THRESHOLD, 1, Actor("root"), clock)
    found = letters(2)
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    decisions.approve(request.id, staff["alex"], clock=clock)
    workorders.close_settled(clock=clock)
    [newer] = letters(1)  # the same error again: a new work order for the group
    assert newer.work_order_id != found[0].work_order_id
    decisions.rollback(request.id, staff["bea"], clock=clock)
    assert {db.session.get(DeadLetter, x.id).work_order_id for x in found} == {newer.work_order_id}
    assert db.session.get(WorkOrder, newer.work_order_id).dead_letter_count == 3
    assert not audited("work_order.open")


def test_a_request_whose_letters_were_all_settled_meanwhile_is_superseded_not_left_to_fail(staff, letters, clock):
    console_settings.save(THRESHOLD, 1, Actor("root"), clock)
    found = letters(2)
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    control.replay(db.session.get(DeadLetter, found[0].id), staff["ada"], clock=clock)
    assert bulk_discard.supersede_settled(clock) == []  # one is still open: the request may still do something
    discards.discard(db.session.get(DeadLetter, found[1].id), "gone", staff["ada"], clock=clock)
    assert bulk_discard.supersede_settled(clock) == [request.id]
    db.session.expire_all()
    closed = db.session.get(Approval, request.id)
    assert closed.status == "superseded" and "none of its 2 dead letters is open any more" in closed.outcome
    [entry] = audited("approval.supersede")
    assert (entry.actor, entry.target_id) == ("system", str(request.id))
    with pytest.raises(Conflict):
        decisions.approve(request.id, staff["alex"], clock=clock)
    assert bulk_discard.supersede_settled(clock) == []


def test_a_single_discard_past_the_persons_hour_is_filed_for_approval(staff, letters, clock):
    console_settings.save(THRESHOLD, 2, Actor("root"), clock)
    found = letters(4)
    assert bulk_discard.discard_one(found[0], "junk", staff["olga"], clock).discarded == 1
    assert bulk_discard.discard_one(found[1], "junk", staff["olga"], clock).discarded == 1
    # One at a time, a person discarded any number (helper 95): the third of the hour waits for a second person.
    outcome = bulk_discard.discard_one(found[2], "junk", staff["olga"], clock)
    assert (outcome.discarded, outcome.discarded_lately) == (0, 2) and outcome.approval.payload["ids"] == [found[2].id]
    # Its title says what waits, not "in bulk": a request may hold one letter (helper 97).
    assert shown.title(outcome.approval.kind) == "Discard dead letters past the hourly allowance"
    assert statuses(found) == ["discarded", "discarded", "open", "open"]
    # Asked again, it is already waiting: nobody files it twice (approving the second could only fail).
    with pytest.raises(Conflict, match=f"already in discard request #{outcome.approval.id} \\(asked by you\\): an "
                       "approver decides it, or you withdraw it to ask again"):
        bulk_discard.discard_one(found[2], "junk", staff["olga"], clock)
    with pytest.raises(Conflict, match="already in discard request"):
        bulk_discard.discard([found[2].id], "junk", staff["olga"], None, clock)
    # A bulk one over the limit leaves the letter already asked for out of its request.
    request = bulk_discard.discard([found[2].id, found[3].id], "junk", staff["olga"], None, clock).approval
    assert request.payload["ids"] == [found[3].id]


def test_a_discard_over_the_limit_of_letters_no_longer_open_files_nothing(staff, letters, clock):
    console_settings.save(THRESHOLD, 0, Actor("root"), clock)
    found = letters(1)
    discards.discard_many([found[0].id], "by hand", staff["bea"], None, clock)
    outcome = bulk_discard.discard([found[0].id, 999_999], "junk", staff["olga"], None, clock)
    assert (outcome.discarded, outcome.skipped, outcome.approval) == (0, 2, None)
    assert db.session.execute(select(Approval)).first() is None


def test_a_rollback_that_can_reopen_nothing_says_why(staff, letters, clock, runs):
    console_settings.save(THRESHOLD, 1, Actor("root"), clock)
    found = letters(2)
    request = bulk_discard.discard([x.id for x in found], "duplicates", staff["olga"], None, clock).approval
    decisions.approve(request.id, staff["alex"], clock=clock)
    for letter in found:
        control.retry_now(runs.get(letter.run_id), staff["bea"], clock=clock)
    # It said "none of these dead letters is still discarded by this request" of two letters reading "discarded".
    with pytest.raises(Conflict, match="its run was retried"):
        decisions.rollback(request.id, staff["bea"], clock=clock)
    assert statuses(found) == ["discarded", "discarded"]
