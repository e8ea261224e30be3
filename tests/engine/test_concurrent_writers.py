"""Writers racing on one row: what SQLite's one write lock hides must hold on PostgreSQL's READ COMMITTED too.

Each race starts its writers at one barrier, in threads with their own sessions (or in worker processes), so on
PostgreSQL they really overlap; `make test` runs this file on both databases.
"""

import threading
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.orm.attributes import set_committed_value

from console.extensions import db
from console.models import (
    Approval,
    AuditEntry,
    ConflictTemplate,
    ConflictTemplateVersion,
    DeadLetter,
    OutboxMessage,
    PolicyVersion,
    RetryPolicyRecord,
    Run,
    RunEvent,
    Task,
    Tenant,
    User,
    WorkOrder,
)
from console.services.actor import Actor
from console.services.delivery import targets
from console.services.dlq import discards
from console.services.engine import batch_submit, claim, control, failures, parking, replays
from console.services.engine.execute import execute
from console.services.errors import Conflict, StaleVersion
from console.services.people import tenants, users
from console.services.policies import versions as policies
from console.services.recovery import approvals, bulk_discard, decisions, params_fix, run_compensation, runbooks
from console.services.scheduling import planner, templates
from console.services.scheduling import tasks as task_service
from console.services.system import alert_rules, console_settings
from console.services.workorders import changes, orders
from tests.factories import BROKEN, LENIENT, Runs
from tests.helpers import PASSWORD

SCHEDULER = Actor("scheduler")


def race(app, writers: int, work) -> list:
    """Run work(i) in `writers` threads released together, each in its own app context; return results or errors."""
    barrier, results = threading.Barrier(writers), [None] * writers

    def one(index: int):
        with app.app_context():
            barrier.wait()
            try:
                results[index] = work(index)
            except Exception as error:  # noqa: BLE001 - the test looks at what each writer got
                results[index] = error
            finally:
                db.session.remove()

    threads = [threading.Thread(target=one, args=(index,)) for index in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.session.expire_all()
    return results


def count(query) -> int:
    value = db.session.execute(select(func.count()).select_from(query.subquery())).scalar_one()
    db.session.commit()
    return value


def in_threads(target, names) -> None:
    """Run target(name) in one thread per name (each thread named so), and wait for them all."""
    threads = [threading.Thread(target=target, args=(name,), name=name) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


def held_open(original, holder: str, filed: threading.Event, looked: threading.Event):
    """Wrap a filing call: in thread `holder` it says it filed, then keeps its transaction open until the other
    thread has looked (at most 1 s); with the lock under test, the other waits for this commit instead."""

    def filing(*args, **kwargs):
        result = original(*args, **kwargs)
        if threading.current_thread().name == holder:
            filed.set()
            looked.wait(1.0)
        return result

    return filing


def noting(original, looker: str, looked: threading.Event):
    """Wrap a lookup: in thread `looker` it says it has looked."""

    def lookup(*args, **kwargs):
        found = original(*args, **kwargs)
        if threading.current_thread().name == looker:
            looked.set()
        return found

    return lookup


def test_two_workers_dead_lettering_one_error_group_keep_one_work_order_and_each_runs_own_error(runs, workers):
    ids = [runs.submit("demo.flaky", {**BROKEN, "message": f"account {n} is closed"}, policy=LENIENT)
           for n in range(20)]
    workers(), workers()
    for run_id in ids:
        runs.wait(run_id, "dead")
    letters = db.session.execute(select(DeadLetter).where(DeadLetter.run_id.in_(ids))).scalars().all()
    assert len(letters) == 20 and len({letter.fingerprint for letter in letters}) == 1
    [order] = db.session.execute(select(WorkOrder)).scalars().all()
    assert (order.status, order.dead_letter_count) == ("open", 20)
    assert {letter.work_order_id for letter in letters} == {order.id}
    [alert] = runs.outbox("alert")
    assert (alert.status, alert.occurrences) == ("pending", 20)
    for run_id in ids:
        run = runs.get(run_id)
        assert (run.status_reason, run.error_code, run.attempt) == ("non_retryable", "bad_account", 1)
        assert len(runs.events(run_id, "running")) == 1  # the handler ran once: never again as worker_lost


def test_concurrent_replays_of_one_letter_restart_its_run_once(app, dead_run):
    run_id, letter_id = dead_run()
    results = race(app, 4, lambda _: replays.replay_many([letter_id], Actor("olga")))
    assert sorted(len(result.runs) for result in results) == [0, 0, 0, 1]
    assert db.session.get(Run, run_id).status == "pending"
    assert count(select(RunEvent).where(RunEvent.run_id == run_id, RunEvent.kind == "replay_of_dead_letter")) == 1
    assert count(select(AuditEntry).where(AuditEntry.action == "dead_letter.replay")) == 1


def test_two_schedulers_racing_one_firing_make_one_run(app, clock):
    task_id = task_service.register(tenants.find("default"), {"name": "nightly", "handler": "demo.noop",
                                                               "cron": "* * * * *"}, Actor("test")).id
    at = datetime(2026, 3, 2, 10, 5, tzinfo=UTC)
    results = race(app, 2, lambda _: planner.fire([planner.Firing(task_id, at)], SCHEDULER, clock)[0].status)
    assert sorted(results) == ["created", "duplicate"]
    assert count(select(Run).where(Run.task_id == task_id)) == 1


def test_two_firings_racing_for_one_mutex_let_one_hold_it(app, clock):
    default = tenants.find("default")
    first, second = (task_service.register(default, {"name": name, "handler": "demo.noop", "cron": "* * * * *",
                                                     "mutex_key": "ledger", "concurrency_policy": "forbid"},
                                           Actor("test")) for name in ("export", "reconcile"))
    at = datetime(2026, 3, 2, 10, 5, tzinfo=UTC)
    ids = [first.id, second.id]
    outcomes = race(app, 2, lambda i: planner.fire([planner.Firing(ids[i], at)], SCHEDULER, clock)[0])
    assert sorted((o.status, o.reason) for o in outcomes) == [("created", None), ("skipped", "mutex_forbid")]


def test_concurrent_approvals_of_one_request_apply_it_once(app, dead_run, staff, clock):
    _, letter_id = dead_run()
    request_id = params_fix.request_fix(letter_id, {**BROKEN, "fail_times": 0}, "the account was reopened",
                                        staff["olga"], clock=clock).id
    deciders = [staff["alex"], staff["bea"]]
    results = race(app, 2, lambda i: decisions.approve(request_id, deciders[i], clock=clock).status)
    assert results.count("executed") == 1
    [refused] = [result for result in results if result != "executed"]
    assert isinstance(refused, Conflict), refused
    assert count(select(AuditEntry).where(AuditEntry.action == "approval.approve")) == 1
    assert count(select(RunEvent).where(RunEvent.kind == "replay_of_dead_letter")) == 1


def test_an_approval_racing_a_plain_replay_of_its_letter_lets_one_win_whole(app, dead_run, staff, clock):
    # Both take the request first, then the run and the letter: neither deadlocks against the other, and whichever
    # takes the request first wins; the other finds it decided (superseded) or the letter replayed.
    winners = []
    for _ in range(4):
        run_id, letter_id = dead_run()
        request = params_fix.request_fix(letter_id, {**BROKEN, "fail_times": 0}, "the account was reopened",
                                         staff["olga"], clock=clock)

        def work(index: int, request_id=request.id, letter_id=letter_id):
            if index == 0:
                return decisions.approve(request_id, staff["alex"], clock=clock).status
            run, closed = control.replay(db.session.get(DeadLetter, letter_id), staff["ada"], clock=clock)
            return closed

        approved, replayed = race(app, 2, work)
        status = db.session.get(Approval, request.id).status
        db.session.commit()
        if status == "executed":
            assert approved == "executed" and isinstance(replayed, Conflict), (approved, replayed)
        else:
            assert status == "superseded" and replayed == [request.id], (approved, replayed)
            # Refused when it read the request (the replay had committed) or when it claimed it (mid-race).
            assert isinstance(approved, Conflict) and "superseded" in approved.detail, approved
        winners.append(status)
        assert count(select(RunEvent).where(RunEvent.run_id == run_id, RunEvent.kind == "replay_of_dead_letter")) == 1
        assert db.session.get(Run, run_id).status == "pending"
        db.session.commit()
    assert count(select(AuditEntry).where(AuditEntry.action == "approval.supersede")) == winners.count("superseded")


def test_concurrent_saves_of_one_policy_number_their_versions_in_turn(app):
    results = race(app, 3, lambda i: policies.save("tight", {"max_attempts": 2 + i}, Actor("test")).name)
    assert results == ["tight"] * 3
    versions = db.session.execute(select(PolicyVersion.version).join(
        RetryPolicyRecord, RetryPolicyRecord.id == PolicyVersion.policy_id).where(RetryPolicyRecord.name == "tight")
        .order_by(PolicyVersion.version)).scalars().all()
    assert versions == [1, 2, 3]


def test_concurrent_saves_of_one_conflict_template_number_their_versions_in_turn(app):
    policies_ = ("allow", "forbid", "replace")
    results = race(app, 3, lambda i: templates.save("nightly", {"concurrency_policy": policies_[i]},
                                                     Actor("test")).name)
    assert results == ["nightly"] * 3
    versions = db.session.execute(select(ConflictTemplateVersion.version).join(
        ConflictTemplate, ConflictTemplate.id == ConflictTemplateVersion.template_id)
        .where(ConflictTemplate.name == "nightly").order_by(ConflictTemplateVersion.version)).scalars().all()
    assert versions == [1, 2, 3]


def test_concurrent_saves_from_one_version_let_one_win_and_refuse_the_others(app):
    # The version is compared under the record's lock: checked before it, all three saw version 1 and all saved.
    policies.save("tight", {"max_attempts": 2}, Actor("test"))
    templates.save("nightly", {"concurrency_policy": "allow"}, Actor("test"))
    attempts = (3, 4, 5)
    saved = race(app, 3, lambda i: policies.save("tight", {"max_attempts": attempts[i]}, Actor(f"p{i}"),
                                                 base_version=1).current_version)
    stale = [result for result in saved if isinstance(result, StaleVersion)]
    assert [result for result in saved if result not in stale] == [2] and len(stale) == 2
    winner = f"p{saved.index(2)}"
    assert all(f"{winner} saved version 2 while you edited version 1" in str(error) for error in stale)
    assert policies.get("tight").current_version == 2
    rules = ("forbid", "replace", "forbid")
    saved = race(app, 3, lambda i: templates.save("nightly", {"concurrency_policy": rules[i]}, Actor("test"),
                                                  base_version=1).current_version)
    stale = [result for result in saved if isinstance(result, StaleVersion)]
    assert [result for result in saved if result not in stale] == [2] and len(stale) == 2
    assert templates.get("nightly").current_version == 2


def test_a_task_saved_while_its_template_changes_ends_with_the_new_rule(app, monkeypatch):
    templates.save("nightly", {"concurrency_policy": "allow"}, Actor("test"))
    # The task sets the rule itself; the edit below hands it to the template while the template changes it.
    task = task_service.register(tenants.find("default"), {"name": "export", "handler": "demo.noop",
                                                           "cron": "* * * * *", "template": "nightly",
                                                           "concurrency_policy": "allow"}, Actor("test"))
    applied, task_read = threading.Event(), threading.Event()
    apply, rules_of = templates._apply, templates.rules_of

    def apply_then_hold(*args, **kwargs):
        changed = apply(*args, **kwargs)
        applied.set()
        # Hold the uncommitted version until the task save has read the template's rules, or for a second: with
        # the lock the task save waits for this commit, so it never reads them meanwhile.
        task_read.wait(1.0)
        return changed

    def rules_noting_the_task_read(record):
        rules = rules_of(record)
        if threading.current_thread().name == "task-save":
            task_read.set()
        return rules

    monkeypatch.setattr(templates, "_apply", apply_then_hold)
    monkeypatch.setattr(templates, "rules_of", rules_noting_the_task_read)

    def save_template():
        with app.app_context():
            templates.save("nightly", {"concurrency_policy": "forbid"}, Actor("test"))
            db.session.remove()

    def save_task():
        with app.app_context():
            applied.wait(10)
            task_service.edit(task_service.get(task.id), {"inherit": ["concurrency_policy"]}, Actor("test"))
            db.session.remove()

    threads = [threading.Thread(target=save_template), threading.Thread(target=save_task, name="task-save")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.session.expire_all()
    saved = db.session.get(Task, task.id)
    # Without the task save taking the template's lock, it wrote the rule it read before the commit: allow.
    assert ("concurrency_policy" in saved.inherits, saved.concurrency_policy) == (True, "forbid")


def test_two_admins_demoting_each_other_at_once_leave_one_admin(app):
    admins = [users.create(name, "admin", PASSWORD, Actor("test"))[0].id for name in ("ada", "max")]
    # Each demotes the other: both would see one admin left if neither waited.
    results = race(app, 2, lambda i: users.update(db.session.get(User, admins[1 - i]), Actor("test"),
                                                  role="operator")[0].role)
    assert sorted(map(type, results), key=str) == sorted([str, Conflict], key=str), results
    db.session.expire_all()
    remaining = db.session.execute(select(func.count()).select_from(User).where(User.role == "admin")).scalar_one()
    assert remaining == 1


def audit_trail(action: str) -> list[tuple]:
    """Return (before, after) of each audit row of an action, in chain order."""
    rows = db.session.execute(select(AuditEntry.before, AuditEntry.after).where(AuditEntry.action == action)
                              .order_by(AuditEntry.seq)).all()
    db.session.commit()
    return [tuple(row) for row in rows]


def assert_replayable(trail: list[tuple]) -> None:
    """Each row's "before" is the state the row above left: the history reads as it happened."""
    for (_, after), (before, _) in zip(trail, trail[1:], strict=False):
        assert {key: after[key] for key in before} == before, trail


def test_changes_at_once_to_one_thing_audit_what_each_replaced(app):
    """An auditor's walk: four pauses at once wrote up to four 'false → true' rows, and eight threshold changes
    each said they replaced 55; an audit trail must read as the history it records."""
    task_id = task_service.register(tenants.find("default"), {"name": "nightly", "handler": "demo.noop",
                                                              "cron": "0 3 * * *"}, SCHEDULER).id
    race(app, 4, lambda i: task_service.set_paused(db.session.get(Task, task_id), True, Actor(f"p{i}")).paused)
    assert audit_trail("task.pause") == [({"paused": False}, {"paused": True})]
    race(app, 6, lambda i: alert_rules.update_rule("dlq_length", {"threshold": 200 + i}, Actor(f"a{i}")))
    trail = audit_trail("alert_rule.update")
    assert len(trail) == 6 and trail[0][0] == {"threshold": 100.0}
    assert_replayable(trail)
    tenant_id = tenants.find("default").id
    race(app, 6, lambda i: tenants.set_quota(db.session.get(Tenant, tenant_id), Actor(f"q{i}"), max_running=3 + i))
    assert_replayable(audit_trail("tenant.set_quota"))
    race(app, 6, lambda i: console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 2 + i, Actor(f"s{i}")))
    assert_replayable(audit_trail("setting.update"))
    race(app, 4, lambda i: targets.save("slack", Actor(f"c{i}"), url=f"https://hooks.example.com/services/T{i}"))
    assert_replayable(audit_trail("channel.update"))


@pytest.mark.parametrize("limit", ["tenant max_running", "policy concurrency"])
def test_workers_claiming_at_once_never_take_more_than_a_limits_last_slot(app, runs, clock, limit):
    """A walk on PostgreSQL: a tenant limited to one running run had two running, claimed 9 ms apart by two worker
    processes that had both counted none running."""
    if limit == "tenant max_running":
        tenants.set_quota(tenants.find("default"), Actor("admin"), max_running=1)
        ids = [runs.submit() for _ in range(4)]
    else:
        ids = [runs.submit(policy={"concurrency": 1}) for _ in range(4)]
    outcomes = race(app, 4, lambda i: claim.claim(ids[i], 0, clock, f"worker-{i}"))
    assert not [outcome for outcome in outcomes if isinstance(outcome, Exception)], outcomes
    assert count(select(Run).where(Run.status == "running")) == 1
    assert sorted(o for o in outcomes if isinstance(o, str)) == [
        "deferred:" + ("quota" if limit == "tenant max_running" else "concurrency")] * 3


@pytest.mark.parametrize("how", ["submits", "batches", "submits over a queue_limit"])
def test_submits_at_once_never_queue_past_a_limit(app, runs, how):
    """A walk on PostgreSQL: a tenant with max_queued 3 took 8 runs from submits sent at once, each counting 0."""
    tenant = tenants.find("default")
    tenants.set_quota(tenant, Actor("admin"), max_queued=100 if how.endswith("queue_limit") else 3)
    policy = {"queue_limit": 3} if how.endswith("queue_limit") else None

    def send(i: int):
        if how == "batches":
            return batch_submit.submit_batch([{"handler": "demo.noop"}] * 2, Actor(f"c{i}"),
                                             lambda name, task_id: tenants.find("default"))
        return runs.submit(policy=policy)

    outcomes = race(app, 8, send)
    assert count(select(Run).where(Run.tenant_id == tenant.id)) == 3
    refused = [o for o in outcomes if isinstance(o, Exception)] if how != "batches" else [
        answer for answers in outcomes for answer in answers if "error" in answer]
    assert len(refused) == (16 if how == "batches" else 8) - 3, outcomes


def test_edits_of_one_task_at_once_audit_a_true_history_and_leave_what_the_last_one_audited(app):
    """A walk on PostgreSQL: eight edits at once each audited the task as it was before any of them, and an edit of
    the cron beside an edit of the params left a row no audit row shows and no validation saw whole."""
    task = task_service.register(tenants.find("default"), {"name": "nightly", "handler": "demo.noop",
                                                           "cron": "0 3 * * *", "params": {"v": "base"}}, SCHEDULER)
    task_id = task.id  # read here: `task` belongs to this thread's session, which the writers must not share

    def edit(i: int):
        change = {"cron": f"{i} 4 * * *"} if i % 2 else {"params": {"v": f"p{i}"}}
        return task_service.edit(db.session.get(Task, task_id), change, Actor(f"e{i}"))

    outcomes = race(app, 6, edit)
    trail = audit_trail("task.edit")
    assert len(trail) == 6 and trail[0][0]["cron"] == "0 3 * * *", outcomes
    assert_replayable(trail)
    final = task_service.snapshot(db.session.get(Task, task_id))
    assert (final["cron"], final["params"]) == (trail[-1][1]["cron"], trail[-1][1]["params"])
    assert final["cron"] != "0 3 * * *" and final["params"] != {"v": "base"}  # both kinds of edit landed


def test_two_undos_of_one_group_ending_at_once_resolve_the_page_they_opened(app, runs, clock, monkeypatch):
    """Each undo, ending, counted the other as still compensating (its end not yet committed), so neither resolved
    the severity-2 page and it stayed open in PagerDuty for good."""
    ids = [runs.submit("demo.flaky_compensated", {"fail_times": 1, "error": "compensable", "severity": 2})
           for _ in range(2)]
    ending, end_undo_page = {run_id: threading.Event() for run_id in ids}, failures._end_undo_page

    def ended_beside_the_other(run, *args, **kwargs):
        ending[run.id].set()
        [other] = [event for run_id, event in ending.items() if run_id != run.id]
        other.wait(1.0)  # both ends uncommitted at once; SQLite's one writer keeps the other out, hence the limit
        return end_undo_page(run, *args, **kwargs)

    monkeypatch.setattr(failures, "_end_undo_page", ended_beside_the_other)
    assert race(app, 2, lambda i: execute(ids[i], 0, clock=clock)) == ["compensated", "compensated"]
    messages = db.session.execute(select(OutboxMessage.kind, OutboxMessage.dedup_key, OutboxMessage.payload)
                                  .order_by(OutboxMessage.id)).all()
    [page] = {key for kind, key, _ in messages if kind == "alert"}
    about_page = [kind for kind, key, payload in messages
                  if key == page or (kind == "resolve" and payload["incident_key"] == f"rebound-{page}")]
    assert about_page[-1] == "resolve", about_page


def test_a_letter_parked_while_its_work_order_closes_lands_on_an_active_order(app, dead_run, clock, monkeypatch):
    first_run, first_letter = dead_run()
    order_id = db.session.get(DeadLetter, first_letter).work_order_id
    db.session.execute(update(DeadLetter).where(DeadLetter.id == first_letter).values(status="discarded"))
    db.session.commit()  # the order's only letter is settled: close_if_resolved may close it
    second_run = Runs().submit("demo.flaky", BROKEN, policy=LENIENT)
    parked, closed = threading.Event(), threading.Event()
    park = parking.park

    def park_then_hold(*args, **kwargs):
        letter = park(*args, **kwargs)
        parked.set()
        closed.wait(1.0)  # hold the uncommitted letter while the closer runs; with the lock, it waits for us
        return letter

    monkeypatch.setattr(parking, "park", park_then_hold)

    def die():
        with app.app_context():
            execute(second_run, 0, clock=clock)
            db.session.remove()

    def close():
        with app.app_context():
            parked.wait(10)
            changes.close_if_resolved(order_id, clock())
            db.session.commit()
            closed.set()
            db.session.remove()

    threads = [threading.Thread(target=die), threading.Thread(target=close)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.session.expire_all()
    (letter,) = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == second_run)).scalars().all()
    assert letter.status == "open"
    # Without the closer locking the order first, PostgreSQL closed it under the new letter.
    assert db.session.get(WorkOrder, letter.work_order_id).status == "open"


def test_an_acknowledgement_keeps_an_assignment_made_since_the_order_was_read(app, dead_run, staff):
    _, letter_id = dead_run()
    order = orders.get(db.session.get(DeadLetter, letter_id).work_order_id)
    changes.assign(order, staff["ada"].id, staff["ada"])
    set_committed_value(order, "assignee_id", None)  # olga's request read the order before ada took it
    changes.acknowledge(order, staff["olga"])
    db.session.expire_all()
    assert (order.status, order.assignee_id) == ("acknowledged", staff["ada"].id)


def test_an_assignment_read_before_another_is_refused_not_audited_as_from_nobody(app, dead_run, staff):
    _, letter_id = dead_run()
    order = orders.get(db.session.get(DeadLetter, letter_id).work_order_id)
    changes.assign(order, staff["ada"].id, staff["ada"])
    set_committed_value(order, "assignee_id", None)  # olga's request read the order before ada took it
    with pytest.raises(Conflict, match="was assigned to ada meanwhile"):
        changes.assign(order, staff["olga"].id, staff["olga"])
    db.session.expire_all()
    assert order.assignee_id == staff["ada"].id
    assert db.session.execute(select(func.count()).select_from(AuditEntry).where(
        AuditEntry.action == "work_order.assign")).scalar_one() == 1


def test_two_people_asking_to_compensate_one_run_at_once_file_one_request(app, runs, staff, clock, monkeypatch):
    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 0})
    assert execute(run_id, 0, clock=clock) == "succeeded"
    filed, second_looked = threading.Event(), threading.Event()
    monkeypatch.setattr(approvals, "request", held_open(approvals.request, "first", filed, second_looked))
    monkeypatch.setattr(run_compensation, "pending", noting(run_compensation.pending, "second", second_looked))
    results = {}

    def ask(name: str, actor: Actor):
        with app.app_context():
            if name == "second":
                filed.wait(10)
            try:
                results[name] = run_compensation.request_compensation(run_id, "step 3 failed", actor, clock=clock).id
            except Conflict as error:
                results[name] = error
            db.session.remove()

    threads = [threading.Thread(target=ask, args=(name, staff[person]), name=name)
               for name, person in (("first", "olga"), ("second", "ada"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert isinstance(results["first"], int) and isinstance(results["second"], Conflict), results
    assert count(select(Approval).where(Approval.kind == run_compensation.NAME)) == 1


def test_a_params_fix_reads_the_runs_params_afresh_under_its_lock(app, dead_run, staff, clock):
    run_id, letter_id = dead_run()
    run = db.session.get(Run, run_id)
    read = dict(run.params)
    db.session.execute(update(Run).where(Run.id == run_id).values(params={**read, "account": 7}))
    db.session.commit()
    set_committed_value(run, "params", read)  # what this session read before another person's edit
    with pytest.raises(Conflict, match="params changed"):
        params_fix.restart_with(run_id, letter_id, read, {**read, "account": 8}, staff["ada"], clock(),
                                message="test")
    db.session.rollback()
    assert db.session.get(Run, run_id).params == {**read, "account": 7}


def test_a_retry_racing_a_discard_of_its_letter_leaves_the_letter_discarded(app, dead_run, staff, clock, monkeypatch):
    run_id, letter_id = dead_run()
    discarded, retried = threading.Event(), threading.Event()
    discard_one = discards._discard

    def discard_then_hold(*args, **kwargs):
        done = discard_one(*args, **kwargs)
        discarded.set()
        retried.wait(1.0)  # uncommitted while the retry runs; the retry's guarded update waits for this commit
        return done

    monkeypatch.setattr(discards, "_discard", discard_then_hold)

    def discard():
        with app.app_context():
            discards.discard(db.session.get(DeadLetter, letter_id), "duplicate order", staff["olga"], clock=clock)
            db.session.remove()

    def retry():
        with app.app_context():
            discarded.wait(10)
            control.retry_now(db.session.get(Run, run_id), staff["ada"], clock=clock)
            retried.set()
            db.session.remove()

    threads = [threading.Thread(target=discard), threading.Thread(target=retry)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.session.expire_all()
    letter = db.session.get(DeadLetter, letter_id)
    assert (letter.status, letter.resolved_by) == ("discarded", "olga")


def test_a_rollback_reopening_a_work_order_while_a_parker_opens_its_groups_next_one_joins_that_one(
        app, dead_run, staff, clock):
    """The rollback's order would be the group's second active one: the unique index refuses it, and the reopened
    letters join the order the parker opened instead (a savepoint keeps the rest of the rollback)."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("SQLite has one writer: the parker's order is committed before the rollback writes, and seen")
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 1, Actor("root"), clock)
    letters = [dead_run()[1] for _ in range(2)]
    first = db.session.get(DeadLetter, letters[0])
    tenant_id, fingerprint, closed_id = first.tenant_id, first.fingerprint, first.work_order_id
    request_id = bulk_discard.discard(letters, "duplicates", staff["olga"], None, clock).approval.id
    decisions.approve(request_id, staff["alex"], clock=clock)
    assert changes.close_settled(clock=clock) == [closed_id]

    parker = db.engine.connect()  # the group's next order, inserted and not yet committed, as a parker holds it
    parker.execute(WorkOrder.__table__.insert().values(tenant_id=tenant_id, fingerprint=fingerprint, title="next",
                                                       status="open", dead_letter_count=1, created_at=clock()))
    outcome = []

    def roll_back():
        with app.app_context():
            try:
                outcome.append(decisions.rollback(request_id, staff["bea"], clock=clock).status)
            except Exception as error:  # noqa: BLE001 - the assertion below says what it got
                outcome.append(error)
            finally:
                db.session.remove()

    thread = threading.Thread(target=roll_back)
    thread.start()
    waiting = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = "
                   "current_database()")
    deadline = time.monotonic() + 20
    with db.engine.connect() as watcher:  # until the rollback's reopen waits on the parker's uncommitted order
        while not watcher.execute(waiting).scalar_one() and time.monotonic() < deadline:
            watcher.rollback()
    parker.commit()
    parker.close()
    thread.join(60)
    assert outcome == ["rolled_back"]
    db.session.expire_all()
    [active] = db.session.execute(select(WorkOrder).where(WorkOrder.status == "open")).scalars().all()
    assert active.title == "next" and active.dead_letter_count == 3
    assert {db.session.get(DeadLetter, letter_id).work_order_id for letter_id in letters} == {active.id}
    assert db.session.get(WorkOrder, closed_id).status == "closed"


def test_a_dlq_fix_and_a_fix_runbook_filed_at_once_for_one_letter_leave_one_waiting(app, dead_run, staff, clock,
                                                                                    monkeypatch):
    _, letter_id = dead_run()
    filed, second_looked = threading.Event(), threading.Event()
    monkeypatch.setattr(approvals, "request", held_open(approvals.request, "form", filed, second_looked))
    monkeypatch.setattr(params_fix, "waiting", noting(params_fix.waiting, "runbook", second_looked))
    results = {}

    def file(name: str):
        with app.app_context():
            try:
                if name == "form":
                    results[name] = params_fix.request_fix(letter_id, {"fail_times": 0}, "reopened", staff["olga"],
                                                           clock=clock).id
                else:
                    filed.wait(10)
                    results[name] = runbooks.start("fix_params_and_replay", {
                        "dead_letter": letter_id, "params": '{"fail_times": 0}'}, staff["ada"], scope=None,
                        reason="reopened", clock=clock, enqueue=False).approval_id
            except (Conflict, runbooks.InvalidParams) as error:
                results[name] = error
            db.session.remove()

    in_threads(file, ("form", "runbook"))
    assert isinstance(results["form"], int) and isinstance(results["runbook"], runbooks.InvalidParams), results
    assert count(select(Approval).where(Approval.status == "pending")) == 1


def test_people_retrying_one_run_at_once_let_one_win_and_tell_the_others_it_moved(app, dead_run, staff, clock):
    run_id, _ = dead_run()
    results = race(app, 4, lambda _: control.retry_now(db.session.get(Run, run_id), staff["ada"], clock=clock))
    assert sum(isinstance(result, tuple) for result in results) == 1
    assert all(isinstance(result, Conflict) for result in results if not isinstance(result, tuple))  # a 409, not a 500
    assert count(select(AuditEntry).where(AuditEntry.action == "run.retry")) == 1


@pytest.mark.parametrize("status", ["dead", "retry_wait"])
def test_a_retry_of_a_run_that_moved_since_it_was_read_is_a_conflict(app, dead_run, staff, clock, status):
    run_id, _ = dead_run()
    db.session.execute(update(Run).where(Run.id == run_id).values(status=status))
    db.session.commit()
    stale = db.session.get(Run, run_id)
    # Another person's retry lands between this request's read and its write.
    with app.app_context():
        control.retry_now(db.session.get(Run, run_id), staff["bea"], clock=clock)
        db.session.remove()
    with pytest.raises(Conflict, match=f"run {run_id} changed meanwhile"):
        control.retry_now(stale, staff["ada"], clock=clock)


def test_people_filing_the_same_letters_for_a_discard_at_once_file_one_request(app, dead_run, staff, clock):
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 0, Actor("root"), clock)
    letters = [dead_run()[1] for _ in range(3)]
    people = [staff[name] for name in ("olga", "alex", "bea", "ada")]
    results = race(app, 4, lambda i: bulk_discard.discard(letters, "junk", people[i], None, clock))
    filed = [result for result in results if isinstance(result, bulk_discard.Outcome)]
    # Each read none waiting and filed its own (helper 97): approving the second could only fail.
    assert len(filed) == 1 and filed[0].approval is not None, results
    refused = [result for result in results if result not in filed]
    assert count(select(Approval).where(Approval.kind == bulk_discard.NAME)) == 1
    request = db.session.execute(select(Approval).where(Approval.kind == bulk_discard.NAME)).scalar_one()
    name = next(person.name for person in people if person.id == request.requested_by_id)
    # Told who asked and who decides: "approve or withdraw that one" was said to operators, who may do neither.
    assert all(isinstance(result, Conflict) and f"already in discard request #{request.id} (asked by {name}): a "
               "person with the approve permission decides it" in str(result) for result in refused)


def test_one_persons_bulk_discards_at_once_never_spend_more_than_their_allowance(app, dead_run, staff, clock):
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 5, Actor("root"), clock)
    letters = [dead_run()[1] for _ in range(12)]
    batches = [letters[i:i + 3] for i in range(0, 12, 3)]
    results = race(app, 4, lambda i: bulk_discard.discard(batches[i], "junk", staff["olga"], None, clock))
    assert not [result for result in results if isinstance(result, Exception)], results
    # Four batches of 3 at once against 5 an hour (four at once took 16 of 10): one discards, the rest are filed.
    assert sum(result.discarded for result in results) == 3
    assert sum(result.approval is not None for result in results) == 3
    assert count(select(DeadLetter).where(DeadLetter.status == "discarded")) == 3


def test_one_failure_reported_twice_at_once_for_a_new_key_is_a_duplicate_not_a_409(app, clock, monkeypatch):
    """An executor's retry after a timeout, racing its first send of a failure Rebound had no run for: both looked,
    found no run, and the second's insert met the first's key: a 409 "someone else changed this" (helper 152)."""
    from console.services.engine import executor_reports

    tenant = tenants.ensure_default()
    db.session.commit()
    created, second_looked = threading.Event(), threading.Event()
    monkeypatch.setattr(executor_reports, "_external_run",
                        held_open(executor_reports._external_run, "first", created, second_looked))
    monkeypatch.setattr(executor_reports, "find_by_key", noting(executor_reports.find_by_key, "second", second_looked))
    report = {"idempotency_key": "ext-race", "error_code": "timeout", "handler": "demo.noop", "retry_after_s": 60}
    results = {}

    def send(name: str):
        with app.app_context():
            if name == "second":
                created.wait(10)
            try:
                run, duplicate = executor_reports.report_failure(tenants.find("default"), dict(report),
                                                                 Actor("billing"), clock=clock)
                results[name] = (run.id, duplicate)
            except Exception as error:  # noqa: BLE001 - the test looks at what each sender got
                results[name] = error
            db.session.remove()

    in_threads(send, ("first", "second"))
    assert results["first"][1] is False and results["second"] == (results["first"][0], True), results
    assert count(select(Run).where(Run.tenant_id == tenant.id)) == 1
