"""A waiting run always says why it waits: capacity of which policy or tenant, window, quota, breaker."""

from datetime import timedelta

from rq.job import Job

from console.domain.breaker import BreakerSettings
from console.extensions import db
from console.models import Tenant
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.engine import breaker_admin, breakers, queueing
from console.services.engine.breakers import BreakerKey
from console.services.engine.execute import execute
from console.services.runs.waiting import Reset, breaker_resets, why_waiting
from tests.conftest import redis_unreachable
from tests.factories import bearer, make_tenant


def _running(run_id: int) -> None:
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": run_id})
    db.session.commit()


def _quota(name: str, max_running: int) -> Tenant:
    tenant = make_tenant(name)
    tenant.max_running = max_running
    db.session.commit()
    return tenant


def test_a_run_over_its_tenants_max_running_says_tenant_quota(runs, clock):
    _quota("acme", 1)
    holder, waiting = runs.submit(tenant="acme"), runs.submit(tenant="acme")
    _running(holder)
    assert execute(waiting, 0, clock=clock) == "deferred:quota"
    run = runs.get(waiting)
    assert run.wait_reason == "tenant quota: tenant acme is running 1 of its max_running 1"
    assert why_waiting(run) == run.wait_reason


def test_a_run_held_by_another_tenants_run_of_its_handler_names_the_policy(runs, clock):
    make_tenant("acme")
    make_tenant("globex")
    holder = runs.submit("demo.noop", policy={"concurrency": 1}, tenant="globex")
    waiting = runs.submit("demo.noop", policy={"concurrency": 1}, tenant="acme")
    _running(holder)
    assert execute(waiting, 0, clock=clock) == "deferred:concurrency"
    reason = why_waiting(runs.get(waiting))
    assert reason.startswith("policy capacity: policy default lets 1 run at once for handler python:demo.noop")
    assert "counted across every tenant" in reason and reason.endswith("1 running")
    assert "globex" not in reason  # the other tenant is not named to this one


def test_the_claim_clears_the_reason(runs, clock):
    _quota("acme", 1)
    holder, waiting = runs.submit(tenant="acme"), runs.submit(tenant="acme")
    _running(holder)
    execute(waiting, 0, clock=clock)
    db.session.execute(db.text("UPDATE runs SET status = 'succeeded' WHERE id = :id"), {"id": holder})
    db.session.commit()
    assert execute(waiting, 0, clock=clock) == "succeeded"
    run = runs.get(waiting)
    assert run.wait_reason is None and why_waiting(run) is None


def test_the_other_reasons_come_from_the_status(runs, clock):
    run = runs.get(runs.submit())
    assert why_waiting(run) == "queued: waiting for a free worker"
    run.status, run.status_reason, run.next_retry_at = "retry_wait", "breaker_open", clock() + timedelta(seconds=20)
    assert why_waiting(run).startswith("circuit breaker: the breaker of handler python:demo.noop was open when its "
                                       "turn came")
    run.status_reason = "http_503"
    assert why_waiting(run).startswith("retry backoff: attempt 0 failed; the next attempt is at")
    run.status, run.status_reason, run.due_at = "pending", "window", clock() + timedelta(hours=2)
    opens = f"{run.due_at:%Y-%m-%d %H:%M:%S} UTC"
    assert why_waiting(run) == f"execution window: it starts when its task's window opens at {opens}"
    run.status_reason = "quota"
    assert why_waiting(run).startswith("tenant quota: tenant default already had its max_queued 10000 runs waiting")
    run.status = "running"
    assert why_waiting(run) is None
    db.session.rollback()


def test_a_retry_that_came_due_says_it_waits_for_a_worker_not_its_backoff(client, auth, runs, clock):
    """Both workers busy with long runs: 22 s after its retry came due, a run's page still said "retry backoff … the
    next attempt is at" a time gone by, and the API said nothing of why it waited (helper 132)."""
    run = runs.get(runs.submit())
    run.status, run.status_reason, run.attempt = "retry_wait", "retryable", 1
    run.next_retry_at = clock() - timedelta(seconds=22)
    db.session.commit()
    due = f"{run.next_retry_at:%Y-%m-%d %H:%M:%S} UTC"
    said = f"queued: attempt 1 failed and its retry came due at {due}; it waits for a free worker"
    assert why_waiting(run, clock()) == said
    assert why_waiting(run, run.next_retry_at - timedelta(seconds=1)).startswith("retry backoff: attempt 1 failed")
    auth.as_role("viewer")
    shown = said.replace(due, f'<time datetime="{run.next_retry_at:%Y-%m-%dT%H:%M:%S}+00:00">{due}</time>')
    assert f"<strong>Waiting:</strong> {shown}" in client.get(f"/runs/{run.id}").get_data(as_text=True)
    body = client.get(f"/worker/tasks/{run.id}", headers=bearer(auth.make_user("vic", "viewer"))).get_json()
    assert body["waiting"] == said
    running = runs.submit()
    _running(running)
    assert client.get(f"/worker/tasks/{running}", headers=bearer(auth.make_user("val", "viewer"))).get_json()[
        "waiting"] is None


def test_the_run_page_shows_why_it_waits(client, auth, runs, clock):
    _quota("acme", 1)
    holder, waiting = runs.submit(tenant="acme"), runs.submit(tenant="acme")
    _running(holder)
    execute(waiting, 0, clock=clock)
    auth.as_role("viewer")
    page = client.get(f"/runs/{waiting}").get_data(as_text=True)
    assert "<strong>Waiting:</strong> tenant quota: tenant acme is running 1 of its max_running 1" in page
    assert "Waiting:" not in client.get(f"/runs/{holder}").get_data(as_text=True)


def test_a_run_put_off_by_its_breaker_says_what_the_breaker_is_now(runs, clock):
    # The reason was true when the run was put off; the breaker may have closed or half-opened since.
    run = runs.get(runs.submit())
    run.status, run.status_reason, run.next_retry_at = "retry_wait", "breaker_open", clock() + timedelta(seconds=20)
    settings = BreakerSettings(failure_threshold=1, open_s=30, success_threshold=1)
    key = breakers.key_for(run.handler, run.tenant_id, "handler")
    assert why_waiting(run, clock()).endswith("The breaker is now closed: the run goes at its next try.")
    breakers.record(key, False, clock(), settings)
    opens_until = f"{clock() + timedelta(seconds=30):%Y-%m-%d %H:%M:%S} UTC"
    assert why_waiting(run, clock()).endswith(f"The breaker is still open, until {opens_until}.")
    assert why_waiting(run, clock() + timedelta(seconds=31)).endswith(
        "The breaker is now half-open: one probe call goes through, and its outcome closes or opens it again.")
    db.session.rollback()


def test_without_redis_the_breaker_reason_still_reads(runs, clock, redis_down):
    run = runs.get(runs.submit())
    run.status, run.status_reason, run.next_retry_at = "retry_wait", "breaker_open", clock() + timedelta(seconds=20)
    assert why_waiting(run, clock()).endswith("(no attempt is spent)")
    db.session.rollback()


def test_a_reset_marks_the_runs_its_breaker_put_off_until_one_is_put_off_again(runs, clock):
    globex = make_tenant("globex")
    ours = runs.submit()  # the default policy: the handler's breaker, shared by every tenant
    theirs = runs.submit(policy={"breaker": {"scope": "handler_and_tenant"}}, tenant="globex")
    shared, own = BreakerKey("python:demo.noop"), BreakerKey("python:demo.noop", globex.id)
    settings = BreakerSettings(failure_threshold=1, open_s=30)
    for key in (shared, own):
        breakers.record(key, False, clock(), settings)
    assert execute(ours, 0, clock=clock) == execute(theirs, 0, clock=clock) == "breaker_open"
    assert breaker_resets([runs.get(ours), runs.get(theirs)]) == {}
    clock.advance(5)
    breaker_admin.reset(shared, Actor("olga"), clock=clock)
    reset_at = clock()
    assert breaker_resets([runs.get(ours), runs.get(theirs)]) == {ours: Reset(reset_at, "olga")}  # globex's is open
    breakers.record(shared, False, clock(), settings)  # it opens again before the run's turn comes
    clock.advance(25)
    assert execute(ours, 0, clock=clock) == "breaker_open"
    assert breaker_resets([runs.get(ours)]) == {}  # put off again: it waits for the breaker anew


def test_a_run_held_by_its_breaker_notes_the_hold_once_however_often_it_asks(runs, clock):
    run_id = runs.submit(policy={"breaker": {"failure_threshold": 1, "open_s": 60}})
    key = breakers.key_for("python:demo.noop", runs.get(run_id).tenant_id, "handler")
    breakers.record(key, False, clock(), BreakerSettings(failure_threshold=1, open_s=60))
    assert execute(run_id, 0, clock=clock) == "breaker_open"
    held, held_at = len(runs.events(run_id)), clock()
    assert " and was still open when it asked again" not in why_waiting(runs.get(run_id))
    for _ in range(5):  # its job comes back early (a re-queue after a Redis loss, the reconciler), again and again
        clock.advance(5)
        assert execute(run_id, 0, clock=clock) == "breaker_open"
    run = runs.get(run_id)
    assert len(runs.events(run_id)) == held  # one "pending → retry wait (breaker open)", not a pair per ask
    assert (run.status, run.status_reason, run.attempt) == ("retry_wait", "breaker_open", 0)
    assert run.updated_at == clock()  # put off again: a reset before now no longer marks it (breaker_resets)
    # Its page says it was asked again, so one timeline entry beside a next try that moves on reads as held, not lost.
    first, last = (f"{moment:%Y-%m-%d %H:%M:%S} UTC" for moment in (held_at, clock()))
    assert why_waiting(run).startswith(
        f"circuit breaker: the breaker of handler python:demo.noop was open when its turn came at {first}, and was "
        f"still open when it asked again at {last}; the next try is at")
    clock.advance(60)
    assert execute(run_id, 0, clock=clock) == "succeeded"  # the breaker half-opens: it goes as the probe


def test_runs_held_together_that_lose_the_half_open_probe_note_nothing_new(runs, clock, monkeypatch):
    policy = {"breaker": {"failure_threshold": 1, "open_s": 60}}
    first, second = runs.submit(policy=policy), runs.submit(policy=policy)
    settings = BreakerSettings(failure_threshold=1, open_s=60)
    key = breakers.key_for("python:demo.noop", runs.get(first).tenant_id, "handler")
    breakers.record(key, False, clock(), settings)
    assert execute(first, 0, clock=clock) == execute(second, 0, clock=clock) == "breaker_open"
    held = len(runs.events(second))
    clock.advance(61)  # both come due as the breaker half-opens
    # The second looked while no probe was out, then the first's worker took it before the second asked.
    monkeypatch.setattr(breakers, "refused_until", lambda *args: None)
    assert breakers.allow(key, clock(), settings).allowed
    assert execute(second, 0, clock=clock) == "breaker_open"
    run = runs.get(second)
    assert len(runs.events(second)) == held  # it added a "retry wait → pending → retry wait" pair each time
    assert (run.status, run.status_reason, run.attempt) == ("retry_wait", "breaker_open", 0)
    assert run.next_retry_at > clock() and run.updated_at == clock()


def test_a_pending_run_says_whether_its_job_is_in_the_queue(app, runs, clock):
    """Submitted while Redis did not answer, a run is in the database only until the reconciler queues it: its page
    and the API said "waiting for a free worker" with every worker idle (helper 133)."""
    run = runs.get(runs.submit())
    assert why_waiting(run, clock()) == "queued: waiting for a free worker"
    with redis_unreachable(app):
        assert why_waiting(run, clock()).startswith("queued in the database: Redis is unreachable, so no worker can")
    Job.fetch(queueing.job_id(run.id, run.series, run.attempt), connection=get_redis()).delete()
    app.extensions.pop("rebound_redis_quiet_until")  # Redis answers again (read_or's quiet period is over)
    assert why_waiting(run, clock()).startswith("queued in the database, not yet in Redis")
