"""GET /metrics: valid Prometheus text, the seeds' names, counts that match the database, from every process."""

import math
import os
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rq import Queue
from rq.registry import ScheduledJobRegistry
from sqlalchemy import func, select, update

from console import metrics
from console.domain.clock import utcnow
from console.extensions import db
from console.models import DeadLetter, Run, RunEvent, SlaBreach, Task, Tenant
from console.redis_conn import get_redis
from console.scheduler.task_jobs import TaskJobs
from console.services.actor import Actor
from console.services.engine import transitions
from console.services.engine.context import HandlerContext
from console.services.engine.execute import execute, this_worker
from console.services.people import tenants
from console.services.scheduling import planner, sla, tasks
from console.services.system.leader import LeaderLock
from tests.factories import Runs
from tests.helpers import wait_for

COUNTERS = [
    "task_retry_scheduled_total", "task_retry_success_total", "task_retry_failure_total", "task_retry_dlq_total",
    "task_retry_escalated_total", "task_scheduler_missed_total", "task_execution_success_total",
    "task_execution_retry_total", "task_sla_breach_total", "worker_task_success_total", "worker_task_retry_total",
    "worker_task_timeout_total", "worker_progress_write_failure_total",
]
GAUGES = ["task_scheduler_on_time_rate", "worker_queue_depth", "worker_pool_concurrency_inuse", "scheduler_leader",
          "dead_letters_open"]
HISTOGRAMS = ["worker_queue_wait_ms"]
# No jitter, and a breaker that stays closed through the workload's string of failures.
NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 60,
             "breaker": {"failure_threshold": 100, "open_s": 30, "success_threshold": 1}}
SCHEDULER = Actor("scheduler")


@pytest.fixture
def runs(app):
    return Runs()


def scrape(client, **headers) -> dict:
    """Return the families of /metrics by their exposed name (counters with their _total)."""
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.content_type.startswith("text/plain")
    families = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        families[family.name + "_total" if family.type == "counter" else family.name] = family
    return families


def value(families: dict, name: str, sample: str | None = None, **labels) -> float:
    """Sum the samples of a family (or one of its sample names) whose labels include `labels`."""
    return sum(s.value for s in families[name].samples
               if s.name == (sample or name) and labels.items() <= s.labels.items())


def count(query) -> int:
    return db.session.execute(select(func.count()).select_from(query.subquery())).scalar_one()


def events(*conditions) -> int:
    return count(select(RunEvent.id).join(Run, Run.id == RunEvent.run_id).where(*conditions))


def test_every_seed_name_is_exposed_with_its_type_even_before_anything_ran(client):
    families = scrape(client)
    for name in COUNTERS:
        assert families[name].type == "counter", name
    for name in GAUGES:
        assert families[name].type == "gauge", name
    assert families["worker_queue_wait_ms"].type == "histogram"
    assert math.isnan(value(families, "task_scheduler_on_time_rate"))  # nothing was due: unknown, not 100%
    assert value(families, "worker_pool_concurrency_inuse", tenant="default") == 0
    assert value(families, "worker_queue_depth", queue="default", state="queued") == 0
    assert value(families, "scheduler_leader") == 0 and value(families, "dead_letters_open", tenant="default") == 0


def add_tenant(name: str) -> Tenant:
    tenant = Tenant(name=name)
    db.session.add(tenant)
    db.session.commit()
    return tenant


def retry_then(runs, clock, run_id: int, attempts: int) -> str:
    """Execute attempts of a run, moving the clock to each retry; return its final status."""
    outcome = None
    for attempt in range(attempts):
        outcome = execute(run_id, attempt, clock=clock)
        if outcome == "retry_wait" and attempt + 1 < attempts:
            clock.set(runs.get(run_id).next_retry_at)
    return outcome


def mixed_workload(runs, clock, app) -> dict:
    """Run successes, retries, dead letters, a timeout, scheduled tasks (on time, late, missed); return ids."""
    clock.set(utcnow() - timedelta(minutes=50))
    add_tenant("acme")
    default = tenants.find("default")
    # Missed firings: a */10 task created 65 minutes ago while no scheduler ran, no grace: all missed.
    missed_task = tasks.register(default, {"name": "missed", "handler": "demo.noop", "cron": "*/10 * * * *",
                                           "misfire_grace_s": 0}, SCHEDULER)
    missed_task.created_at = clock() - timedelta(minutes=65)
    db.session.commit()
    assert TaskJobs(app, None, None, clock).catch_up()[1] >= 6
    for _ in range(3):
        assert execute(runs.submit("demo.noop"), 0, clock=clock) == "succeeded"
    assert retry_then(runs, clock, runs.submit("demo.flaky", {"fail_times": 1}, policy=NO_JITTER), 2) == "succeeded"
    exhausted = runs.submit("demo.flaky", {"fail_times": 9}, policy={**NO_JITTER, "max_attempts": 2}, tenant="acme")
    assert retry_then(runs, clock, exhausted, 2) == "dead"
    assert execute(runs.submit("demo.flaky", {"error": "fatal"}, policy=NO_JITTER), 0, clock=clock) == "dead"
    manual = runs.submit("demo.flaky", {"error": "compensable", "severity": 3}, policy=NO_JITTER)
    assert execute(manual, 0, clock=clock) == "dead"
    slow = runs.submit("demo.sleep", {"seconds": 3}, policy={**NO_JITTER, "timeout_s": 1, "max_attempts": 2})
    assert execute(slow, 0, clock=clock) == "retry_wait"
    # Scheduled tasks: one on time, one retried to success, one started five minutes late three times (SLA).
    on_time = tasks.register(default, {"name": "on-time", "handler": "demo.noop", "cron": "0 * * * *"}, SCHEDULER)
    flaky = tasks.register(default, {"name": "flaky", "handler": "demo.flaky", "cron": "0 * * * *",
                                     "params": {"fail_times": 1}, "policy": NO_JITTER}, SCHEDULER)
    late = tasks.register(default, {"name": "late", "handler": "demo.noop", "cron": "0 * * * *",
                                    "sla": {"max_start_delay_s": 60}}, SCHEDULER)
    [fired] = planner.fire([planner.Firing(on_time.id, clock())], SCHEDULER, clock)
    assert execute(fired.run_id, 0, clock=clock) == "succeeded"
    [fired] = planner.fire([planner.Firing(flaky.id, clock())], SCHEDULER, clock)
    assert retry_then(runs, clock, fired.run_id, 2) == "succeeded"
    for _ in range(3):
        [fired] = planner.fire([planner.Firing(late.id, clock())], SCHEDULER, clock)
        clock.advance(300)
        assert execute(fired.run_id, 0, clock=clock) == "succeeded"
        sla.check(clock)
    # One run a worker holds right now, one still waiting.
    running = runs.submit("demo.noop")
    db.session.execute(update(Run).where(Run.id == running).values(status="running"))
    db.session.commit()
    runs.submit("demo.noop", tenant="acme")
    return {"missed_task": missed_task.id}


def test_counters_match_the_database_after_a_mixed_workload(client, runs, clock, app):
    ids = mixed_workload(runs, clock, app)
    families = scrape(client)
    failed_attempt = (RunEvent.from_status == "running") & RunEvent.to_status.in_(("retry_wait", "dead", "failed"))
    expected = {
        "task_retry_scheduled_total": events(RunEvent.kind == "retry_wait", RunEvent.reason == "retryable"),
        "task_retry_success_total": events(RunEvent.kind == "succeeded", RunEvent.attempt > 1),
        "task_retry_failure_total": events(failed_attempt, RunEvent.attempt > 1),
        "task_retry_dlq_total": count(select(DeadLetter.id)),
        "task_retry_escalated_total": count(select(DeadLetter.id).where(DeadLetter.reason == "manual_intervention"))
        + count(select(SlaBreach.id).where(SlaBreach.escalated.is_(True))) // sla.ESCALATE_AFTER,
        "task_scheduler_missed_total": db.session.get(Task, ids["missed_task"]).missed_total,
        "task_execution_success_total": events(RunEvent.kind == "succeeded", Run.task_id.is_not(None)),
        "task_execution_retry_total": events(RunEvent.kind == "running", RunEvent.attempt > 1,
                                             Run.task_id.is_not(None)),
        "task_sla_breach_total": count(select(SlaBreach.id)),
        "worker_task_success_total": events(RunEvent.kind == "succeeded"),
        "worker_task_retry_total": events(RunEvent.kind == "retry_wait", RunEvent.reason == "retryable"),
        "worker_task_timeout_total": events(failed_attempt, RunEvent.error_code == "timeout"),
        "worker_progress_write_failure_total": 0,
    }
    assert {name: value(families, name) for name in expected} == expected
    # The workload touched every path, so none of these is a vacuous zero.
    assert expected["task_retry_dlq_total"] == 3 and expected["task_retry_escalated_total"] == 2
    assert expected["task_sla_breach_total"] == 3 and expected["worker_task_timeout_total"] == 1
    assert expected["task_execution_retry_total"] == 1 and expected["task_retry_success_total"] == 2
    assert expected["task_scheduler_missed_total"] >= 6
    # Labels name the tenant and handler, never a run.
    assert value(families, "task_retry_dlq_total", tenant="acme", handler="python:demo.flaky", reason="exhausted") == 1
    assert value(families, "task_retry_escalated_total", reason="sla_consecutive_breaches") == 1
    assert value(families, "task_retry_escalated_total", reason="manual_intervention") == 1
    assert {name for s in families["task_retry_dlq_total"].samples for name in s.labels} == {
        "tenant", "handler", "reason"}
    # The histogram saw every claim; the five-minute-late starts land above the 250 s bucket.
    claims = events(RunEvent.kind == "running")
    assert value(families, "worker_queue_wait_ms", "worker_queue_wait_ms_count") == claims
    assert value(families, "worker_queue_wait_ms", "worker_queue_wait_ms_bucket", le="+Inf") == claims
    assert value(families, "worker_queue_wait_ms", "worker_queue_wait_ms_bucket", le="250000.0") <= claims - 3
    # Gauges read now: the claimed run, the queues in Redis, the last hour's start punctuality.
    assert value(families, "worker_pool_concurrency_inuse", tenant="default") == 1
    assert value(families, "worker_pool_concurrency_inuse", tenant="acme") == 0
    open_letters = {name: count(select(DeadLetter.id).join(Tenant, Tenant.id == DeadLetter.tenant_id).where(
        DeadLetter.status == "open", Tenant.name == name)) for name in ("default", "acme")}
    assert {name: value(families, "dead_letters_open", tenant=name) for name in open_letters} == open_letters
    assert sum(open_letters.values()) == 3
    redis = get_redis()
    assert value(families, "worker_queue_depth", queue="default", state="queued") == Queue("default",
                                                                                         connection=redis).count
    retries = ScheduledJobRegistry(queue=Queue("retries", connection=redis)).get_job_count(cleanup=False)
    assert value(families, "worker_queue_depth", queue="retries", state="scheduled") == retries > 0
    # Five task runs were due in the last hour: two started on time, three five minutes late.
    assert value(families, "task_scheduler_on_time_rate") == pytest.approx(2 / 5)


def test_the_scheduler_leader_gauge_is_1_while_a_scheduler_holds_the_lock(client):
    lock = LeaderLock(get_redis(), ttl_s=10)
    assert lock.acquire_or_renew()
    assert value(scrape(client), "scheduler_leader") == 1
    lock.release()  # a scheduler that stops (or whose lock lapses, frozen or killed) leaves none
    assert value(scrape(client), "scheduler_leader") == 0


def test_a_change_that_rolls_back_counts_nothing(client, runs, clock):
    run_id = runs.submit("demo.noop")
    transitions.move(runs.get(run_id), "running", clock(), attempt=1)
    db.session.rollback()  # e.g. the handler's bookkeeping failed before the commit
    assert value(scrape(client), "worker_queue_wait_ms", "worker_queue_wait_ms_count") == 0
    transitions.move(runs.get(run_id), "running", clock(), attempt=1)
    db.session.commit()
    assert value(scrape(client), "worker_queue_wait_ms", "worker_queue_wait_ms_count") == 1


def test_a_failed_progress_write_is_counted(client, runs, monkeypatch):
    run_id = runs.submit("demo.noop")

    def broken(*args, **kwargs):
        raise OSError("database is locked")

    monkeypatch.setattr(type(db.engine), "begin", broken)
    ctx = HandlerContext(run_id=run_id, tenant="default", task=None, handler="python:demo.noop", params={},
                         attempt=1, series=1, execution=1, idempotency_key="k", retry_token="t", trace_id="x",
                         timeout_s=10)
    ctx.progress(50, "half way")
    monkeypatch.undo()
    assert ctx.progress_failures == 1
    assert value(scrape(client), "worker_progress_write_failure_total", kind="progress") == 1


def test_long_running_processes_send_their_counts_in_batches_and_a_fork_sends_none_twice(client, runs, clock):
    metrics.start_batching(3600)  # as `rebound worker` does with REBOUND_METRICS_FLUSH_S; never due in this test
    try:
        assert execute(runs.submit("demo.noop"), 0, clock=clock) == "succeeded"
        assert not get_redis().exists(metrics.PREFIX + "worker_task_success_total")  # still in this process
        child = os.fork()
        if child == 0:  # like RQ's work horse: it must not send what its parent holds
            metrics.flush()
            os._exit(0)
        os.waitpid(child, 0)
        assert value(scrape(client), "worker_task_success_total") == 1  # a scrape sends its own process's first
    finally:
        metrics.start_batching(0)


def test_counts_from_a_worker_process_reach_the_web_process(client, runs, workers):
    assert value(scrape(client), "worker_task_success_total") == 0
    run_ids = [runs.submit("demo.noop") for _ in range(3)]
    run_ids.append(runs.submit("demo.flaky", {"fail_times": 1}, policy=NO_JITTER))
    workers()
    for run_id in run_ids:
        runs.wait(run_id, "succeeded")

    def counted():
        families = scrape(client)
        return families if value(families, "worker_task_success_total") == 4 else None

    families = wait_for(counted, timeout_s=10, what="the worker's counts to reach /metrics")
    assert value(families, "task_retry_scheduled_total", handler="python:demo.flaky") == 1
    assert value(families, "task_retry_success_total", tenant="default") == 1
    assert value(families, "worker_queue_wait_ms", "worker_queue_wait_ms_count") == 5
    # This process executed nothing: every attempt ran in the worker process.
    assert {e.worker_id for run_id in run_ids for e in runs.events(run_id, "running")}.isdisjoint({this_worker()})


def test_a_metrics_token_guards_the_endpoint(client, app):
    app.config["METRICS_TOKEN"] = "scrape-secret-123"
    refused = client.get("/metrics")
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Basic scrape-secret-123"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer scrape-secret-123"}).status_code == 200
    app.config["METRICS_TOKEN"] = ""
    assert client.get("/metrics").status_code == 200  # open by default, as exporters are
