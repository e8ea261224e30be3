"""The attempt executor, called as the RQ job calls it, with a clock the test moves."""

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from console.domain.breaker import BreakerSettings
from console.domain.errors import RetryableError
from console.extensions import db
from console.models import Run
from console.services.engine import breakers, handler_kinds
from console.services.engine.execute import execute
from console.services.engine.transitions import StaleRun, move

NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 60}
BREAKER = {**NO_JITTER, "max_attempts": 5, "breaker": {"failure_threshold": 2, "open_s": 30, "success_threshold": 2}}


def test_retry_after_wins_over_the_computed_backoff(runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 1, "retry_after_s": 7}, policy=NO_JITTER)
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    run = runs.get(run_id)
    assert run.next_retry_at - clock() == timedelta(seconds=7)
    assert runs.events(run_id, "retry_wait")[0].data == {"delay_s": 7.0, "retry_after_s": 7}


def test_backoff_grows_by_the_multiplier_and_stops_at_the_cap(runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 9}, policy={**NO_JITTER, "max_delay_s": 3, "max_attempts": 5})
    delays = []
    for attempt in range(4):
        assert execute(run_id, attempt, clock=clock) == "retry_wait"
        run = runs.get(run_id)
        delays.append((run.next_retry_at - clock()).total_seconds())
        clock.set(run.next_retry_at)
    assert delays == [1, 2, 3, 3]
    assert execute(run_id, 4, clock=clock) == "dead"


def test_a_duplicate_or_stale_delivery_does_nothing(runs, clock):
    run_id = runs.submit("demo.noop")
    assert execute(run_id, 0, clock=clock) == "succeeded"
    assert execute(run_id, 0, clock=clock) == "skipped"  # the same job delivered twice
    assert len(runs.events(run_id, "running")) == 1


def test_the_claim_is_conditional_so_only_one_worker_wins(runs, clock):
    run_id = runs.submit("demo.noop")
    with Session(db.engine, expire_on_commit=False) as worker_a:
        seen_by_a = worker_a.get(Run, run_id)  # worker A reads the run as pending ...
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": run_id})
    db.session.commit()  # ... worker B claims it first
    with pytest.raises(StaleRun):
        move(seen_by_a, "running", clock(), attempt=1)
    assert runs.events(run_id, "running") == []


def test_breaker_opens_defers_without_spending_an_attempt_half_opens_and_closes(runs, clock):
    failing = [runs.submit("demo.flaky", {"fail_times": 9}, policy=BREAKER) for _ in range(2)]
    for run_id in failing:
        assert execute(run_id, 0, clock=clock) == "retry_wait"
    assert breakers.state_of("python:demo.flaky", clock()).state == "open"
    assert [m.payload["rule"] for m in runs.outbox("alert")] == ["breaker_opened"]

    healthy = runs.submit("demo.flaky", {"fail_times": 0}, policy=BREAKER)
    assert execute(healthy, 0, clock=clock) == "breaker_open"
    run = runs.get(healthy)
    assert (run.status, run.status_reason, run.attempt) == ("retry_wait", "breaker_open", 0)
    assert run.next_retry_at == clock() + timedelta(seconds=30)

    clock.advance(30)
    assert breakers.state_of("python:demo.flaky", clock()).state == "half_open"
    assert execute(healthy, 0, clock=clock) == "succeeded"  # the one probe
    assert breakers.state_of("python:demo.flaky", clock()).state == "half_open"
    second = runs.submit("demo.flaky", {"fail_times": 0}, policy=BREAKER)
    assert execute(second, 0, clock=clock) == "succeeded"
    assert breakers.state_of("python:demo.flaky", clock()).state == "closed"
    assert not breakers.exists("python:demo.flaky")  # closed and clean: nothing left for the Breakers page to list


def test_a_callers_bad_input_never_opens_the_breaker(runs, clock):
    # Non-retryable failures say nothing about the dependency's health; one tenant's bad requests must not
    # hold every other tenant's runs behind an open breaker.
    for _ in range(4):
        bad = runs.submit("demo.flaky", {"fail_times": 9, "error": "fatal", "code": "invalid_account"},
                          policy=BREAKER)
        assert execute(bad, 0, clock=clock) == "dead"
    assert breakers.state_of("python:demo.flaky", clock()).state == "closed"
    assert breakers.state_of("python:demo.flaky", clock()).consecutive_failures == 0
    assert execute(runs.submit("demo.flaky", {"fail_times": 0}, policy=BREAKER), 0, clock=clock) == "succeeded"


def test_half_open_lets_one_probe_through_at_a_time(runs, clock):
    for run_id in [runs.submit("demo.flaky", {"fail_times": 9}, policy=BREAKER) for _ in range(2)]:
        execute(run_id, 0, clock=clock)
    clock.advance(31)
    allowed, *_ = breakers.allow("python:demo.flaky", clock(), BreakerSettings(2, 30, 2))
    assert allowed
    second = runs.submit("demo.noop")  # another handler: its breaker is its own
    assert execute(second, 0, clock=clock) == "succeeded"
    waiting = runs.submit("demo.flaky", {"fail_times": 0}, policy=BREAKER)
    assert execute(waiting, 0, clock=clock) == "breaker_open"


def test_a_failing_probe_reopens_the_breaker(runs, clock):
    for run_id in [runs.submit("demo.flaky", {"fail_times": 9}, policy=BREAKER) for _ in range(2)]:
        execute(run_id, 0, clock=clock)
    clock.advance(30)
    probe = runs.submit("demo.flaky", {"fail_times": 9}, policy=BREAKER)
    assert execute(probe, 0, clock=clock) == "retry_wait"
    state = breakers.state_of("python:demo.flaky", clock())
    assert state.state == "open" and state.open_until == clock() + timedelta(seconds=30)


def test_a_probe_that_fails_on_bad_input_frees_the_slot_for_the_next_probe(runs, clock):
    # The bad input says nothing about the dependency, but the probe slot it held must not stay taken until
    # the probe timeout: every run of the handler would wait that long behind it.
    for run_id in [runs.submit("demo.flaky", {"fail_times": 9}, policy=BREAKER) for _ in range(2)]:
        execute(run_id, 0, clock=clock)
    clock.advance(30)
    bad = runs.submit("demo.flaky", {"fail_times": 9, "error": "fatal", "code": "invalid_account"}, policy=BREAKER)
    assert execute(bad, 0, clock=clock) == "dead"
    state = breakers.state_of("python:demo.flaky", clock())
    assert (state.state, state.probe_in_flight, state.consecutive_failures) == ("half_open", False, 2)
    assert execute(runs.submit("demo.flaky", {"fail_times": 0}, policy=BREAKER), 0, clock=clock) == "succeeded"


def test_a_bad_input_outcome_never_frees_another_calls_probe(runs, clock):
    settings = BreakerSettings(2, 30, 2)
    handler = "python:demo.flaky"
    breakers.record(handler, False, clock(), settings)
    early = breakers.allow(handler, clock(), settings)  # allowed while closed, with a failure counted
    breakers.record(handler, False, clock(), settings)
    clock.advance(30)
    probe = breakers.allow(handler, clock(), settings)
    assert probe.allowed and probe.probe_until is not None
    breakers.release_probe(handler, early)  # the early call ends on bad input: the probe is not its own
    assert breakers.state_of(handler, clock()).probe_in_flight
    breakers.release_probe(handler, probe)
    assert not breakers.state_of(handler, clock()).probe_in_flight


def test_concurrency_limit_defers_without_spending_an_attempt(runs, clock):
    first = runs.submit("demo.noop", policy={"concurrency": 1})
    second = runs.submit("demo.noop", policy={"concurrency": 1})
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": first})
    db.session.commit()
    assert execute(second, 0, clock=clock) == "deferred:concurrency"
    run = runs.get(second)
    assert (run.status, run.attempt) == ("pending", 0)


def test_a_success_resets_failures_only_if_the_call_began_after_them(runs, clock):
    settings = BreakerSettings(3, 30, 1)
    handler = "python:demo.flaky"
    began_clean = breakers.allow(handler, clock(), settings)
    assert began_clean.allowed and began_clean.clean
    breakers.record(handler, False, clock(), settings)  # another call failed while this one ran
    breakers.record(handler, True, clock(), settings, clean_before=began_clean.clean)
    assert breakers.state_of(handler, clock()).consecutive_failures == 1  # no proof the failure has cleared
    began_after = breakers.allow(handler, clock(), settings)
    assert began_after.allowed and not began_after.clean
    breakers.record(handler, True, clock(), settings, clean_before=began_after.clean)
    assert breakers.state_of(handler, clock()).consecutive_failures == 0


@pytest.mark.parametrize("outcome", ["succeeds", "fails"])
def test_an_outcome_is_dropped_when_the_run_moved_on_while_the_handler_ran(runs, clock, monkeypatch, outcome):
    run_id = runs.submit("demo.noop", policy=NO_JITTER)

    def given_up_meanwhile(ctx):
        # The reconciler took this attempt for lost (its heartbeat stopped) and scheduled the next one.
        with db.engine.begin() as connection:
            connection.execute(db.text("UPDATE runs SET status = 'retry_wait', status_reason = 'worker_lost' "
                                       "WHERE id = :id"), {"id": ctx.run_id})
        if outcome == "fails":
            raise RetryableError("flaky", "late failure")
        return {"late": True}

    monkeypatch.setattr(handler_kinds, "resolve", lambda handler: handler_kinds.Invocation(given_up_meanwhile))
    assert execute(run_id, 0, clock=clock) == "stale"
    run = runs.get(run_id)
    assert (run.status, run.status_reason, run.result) == ("retry_wait", "worker_lost", None)
    # A success the engine dropped is noted: a later success of the run repeats its effect (a duplicate).
    noted = ["stale_success"] if outcome == "succeeds" else []
    assert [event.kind for event in runs.events(run_id)] == ["submitted", "running", *noted]


def test_a_breaker_deferred_run_whose_time_passed_is_queued_again_once_not_every_round(runs, clock):
    """An on-call walk froze every worker: the reconciler queued the same retry jobs again every 30 s (72 entries for
    12 jobs on the retries queue), since it asked about the deferral's job while queueing the attempt's."""
    from rq import Queue
    from rq.job import Job

    from console.redis_conn import get_redis
    from console.services.engine import queueing
    from console.services.engine.reconcile import reconcile

    for run_id in [runs.submit("demo.flaky", {"fail_times": 9}, policy=BREAKER) for _ in range(2)]:
        assert execute(run_id, 0, clock=clock) == "retry_wait"
    held = runs.submit("demo.flaky", {"fail_times": 0}, policy=BREAKER)
    assert execute(held, 0, clock=clock) == "breaker_open"
    Job.fetch(queueing.job_id(held, 1, 0), connection=get_redis()).delete()  # its worker took it (here: this test)
    retries = Queue(queueing.RETRY_QUEUE, connection=get_redis())
    clock.advance(60)  # past its deferral, and no worker moved its job: the reconciler queues it
    for _ in range(3):
        reconcile(clock)
    assert retries.get_job_ids().count(queueing.job_id(held, 1, 0)) == 1
    assert len(runs.events(held, "requeued")) == 1


def test_a_retry_queued_by_the_reconciler_says_whether_its_job_was_gone_or_only_not_moved(runs, clock):
    """With RQ's scheduler down its job still waited in the schedule, and the timeline said "retry job missing"."""
    from rq.job import Job

    from console.redis_conn import get_redis
    from console.services.engine import queueing
    from console.services.engine.reconcile import reconcile

    retry = {"max_attempts": 3, "base_delay_s": 1, "jitter": 0}
    overdue, gone = (runs.submit("demo.flaky", {"fail_times": 1}, policy=retry) for _ in range(2))
    for run_id in (overdue, gone):
        assert execute(run_id, 0, clock=clock) == "retry_wait"
    Job.fetch(queueing.job_id(gone, 1, 1), connection=get_redis()).delete()
    clock.advance(60)  # past their time, and no scheduler moved them
    reconcile(clock)
    assert [event.reason for event in runs.events(overdue, "requeued")] == ["retry_overdue"]
    assert [event.reason for event in runs.events(gone, "requeued")] == ["retry_job_missing"]


def test_each_timeline_row_counts_the_handler_s_executions_so_far(runs, clock):
    """The column was written 0 on every row: the timeline could not tell which rows came after a second run."""
    run_id = runs.submit("demo.flaky", {"fail_times": 1}, policy={"max_attempts": 3, "base_delay_s": 1, "jitter": 0})
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    clock.advance(2)
    assert execute(run_id, 1, clock=clock) == "succeeded"
    counted = [(event.kind, event.to_status, event.executions) for event in runs.events(run_id) if event.to_status]
    assert counted == [("submitted", "pending", 0), ("running", "running", 1), ("retry_wait", "retry_wait", 1),
                       ("pending", "pending", 1), ("running", "running", 2), ("succeeded", "succeeded", 2)]


def test_a_pending_run_claimed_while_the_reconciler_reads_its_batch_is_not_queued_again(runs, monkeypatch):
    """A backlog's runs are claimed and finished between the reconciler's read of its batch and its look at each job:
    the job then read finished, so 557 finished runs got "requeued · job missing" and a second job (helper 170)."""
    from datetime import timedelta

    from rq import Queue
    from sqlalchemy import update

    from console.domain.clock import utcnow
    from console.extensions import db
    from console.models import Run
    from console.redis_conn import get_redis
    from console.services.engine import queueing
    from console.services.engine import reconcile as reconciler

    taken, lost = runs.submit("demo.noop"), runs.submit("demo.noop")
    Queue(queueing.RUN_QUEUE, connection=get_redis()).empty()  # both jobs taken: one by a worker, one lost
    db.session.execute(update(Run).where(Run.id.in_([taken, lost])).values(  # pending past REQUEUE_AFTER_S
        enqueued_at=utcnow() - timedelta(minutes=2)))
    db.session.commit()
    real_state = queueing.job_state

    def a_worker_takes_it_meanwhile(run_id, *args):
        if run_id == taken:
            assert execute(taken, 0) == "succeeded"
            return "finished", None
        return real_state(run_id, *args)

    monkeypatch.setattr(queueing, "job_state", a_worker_takes_it_meanwhile)
    report = reconciler.reconcile()
    assert report.requeued == [lost]
    assert runs.events(taken, "requeued") == [] and runs.status(taken) == "succeeded"
    assert [event.reason for event in runs.events(lost, "requeued")] == ["job_missing"]
    assert Queue(queueing.RUN_QUEUE, connection=get_redis()).get_job_ids() == [queueing.job_id(lost, 1, 0)]
