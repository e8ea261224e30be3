"""Queues & workers: depths and delayed jobs as RQ holds them, workers, the scheduler leader, Redis down."""

import re
from datetime import timedelta

import redis
from rq import SimpleWorker
from rq.job import Job

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Tenant
from console.redis_conn import ANSWER_TIMEOUT_S, get_redis
from console.services.actor import Actor
from console.services.engine import queueing
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.system import leader


def queue_row(page: str, name: str) -> list[str]:
    match = re.search(rf'<tr data-queue="{name}">(.*?)</tr>', page, re.S)
    assert match, f"no row for queue {name}"
    return [cell.strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", match.group(1), re.S)]


def worker_row(page: str, name: str) -> str | None:
    match = re.search(rf'<tr data-worker="{re.escape(name)}">(.*?)</tr>', page, re.S)
    return match.group(1) if match else None


def busy_worker(name: str, job_id: str) -> SimpleWorker:
    """Register a worker with RQ and make it hold a job, without running anything."""
    worker = SimpleWorker(["default", "retries"], connection=get_redis(), name=name)
    worker.register_birth()
    worker.set_state("busy")
    worker.prepare_execution(Job.fetch(job_id, connection=get_redis()))
    return worker


def test_depths_and_delayed_counts_match_what_was_enqueued(client, auth):
    now = utcnow()
    for run_id in (9001, 9002):
        queueing.enqueue_now(run_id, 1, 0, 60)
    for run_id, minutes in ((9003, 10), (9004, 25), (9005, 40)):
        queueing.enqueue_at(now + timedelta(minutes=minutes), run_id, 1, 1, 60)
    queueing.enqueue_now(9006, 1, 0, 60, queue="maintenance")
    auth.as_role("viewer")
    response = client.get("/queues/")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    default, retries, maintenance = (queue_row(page, name) for name in ("default", "retries", "maintenance"))
    assert (default[1], default[3]) == ("2", "0")  # waiting, delayed
    assert (retries[1], retries[3]) == ("0", "3")
    assert re.search(r"in (9|10) min", retries[4])  # the earliest delayed job is due in ten minutes
    assert maintenance[1] == "1"
    assert "s ago" in default[2]  # the oldest waiting job's age
    assert 'data-counter="waiting">3<' in page and 'data-counter="delayed">3<' in page
    # Which runs a limit holds back is said on the Runs list, one click away (helper 136).
    assert '<a href="/runs?status=pending&amp;status=retry_wait">the Runs list</a> says which' in page


def test_a_registered_worker_shows_with_its_state_and_a_link_to_the_run_it_works_on(client, auth):
    run, _ = submit(tenants.find("default"), Actor("test"), handler="demo.noop")
    busy_worker("worker-a", queueing.job_id(run.id, 1, 0))
    auth.as_role("viewer")
    page = client.get("/queues/").get_data(as_text=True)
    row = worker_row(page, "worker-a")
    assert row is not None
    assert '<span class="badge running">busy</span>' in row and "default, retries" in row
    assert f'href="/runs/{run.id}"' in row and "attempt 1" in row and "last: " not in row
    assert "No worker is running" not in page
    assert queue_row(page, "default")[5] == "1"  # Running
    # RQ's counts are of jobs: a handler that fails is a job done (it read "succeeded 740 · failed 0").
    assert ">Jobs done</th>" in page and ">Jobs crashed</th>" in page and ">Succeeded</th>" not in page


def test_a_worker_busy_with_a_long_run_shows_the_runs_heartbeat_not_its_last_rq_beat(client, auth):
    # RQ beats a worker between jobs only; during a long handler the run's heartbeat proves the worker alive.
    run, _ = submit(tenants.find("default"), Actor("test"), handler="demo.noop")
    worker = busy_worker("worker-a", queueing.job_id(run.id, 1, 0))
    get_redis().hset(worker.key, "last_heartbeat", (utcnow() - timedelta(minutes=12)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    run.status, run.attempt, run.heartbeat_at = "running", 1, utcnow() - timedelta(seconds=4)
    db.session.commit()
    auth.as_role("viewer")
    row = worker_row(client.get("/queues/").get_data(as_text=True), "worker-a")
    assert "12 min ago" not in row
    assert re.search(r">[4-9] s ago</time>", row)
    assert f"run {run.id}&#39;s heartbeat" in row or f"run {run.id}'s heartbeat" in row

    # A worker that died on this attempt, while another worker runs the run's next one (its RQ key outlives it for
    # a while): the run's beat is the other worker's, so this one shows its own, old beat.
    run.attempt = 2
    db.session.commit()
    page = client.get("/queues/").get_data(as_text=True)
    row = worker_row(page, "worker-a")
    assert "12 min ago" in row and "heartbeat</div>" not in row
    # RQ still calls it busy; silent this long on a run that moved on, it is lost, and counted out.
    assert '<span class="badge bad" title="Busy on a run that no longer hears from it' in row and ">lost</span>" in row
    assert f'<span class="subtle">last: </span><a class="mono" href="/runs/{run.id}"' in row  # not its "current job"
    assert 'data-counter="workers">0<' in page and 'data-counter="busy">0<' in page and "No worker is running" in page
    run.attempt = 1
    db.session.commit()

    # Once the run has ended, the worker's own beat is what is known of it.
    run.status = "succeeded"
    db.session.commit()
    row = worker_row(client.get("/queues/").get_data(as_text=True), "worker-a")
    assert "12 min ago" in row and ">lost</span>" in row

    # Killed mid-run: the run's heartbeat, newer than the worker's own, went silent too (it read "busy" until the
    # reconciler retried the run: helper 97).
    run.status, run.heartbeat_at = "running", utcnow() - timedelta(minutes=2)
    db.session.commit()
    row = worker_row(client.get("/queues/").get_data(as_text=True), "worker-a")
    assert ">lost</span>" in row and "last: " in row
    run.status = "succeeded"
    db.session.commit()

    # A worker that just took a job beat a moment ago: busy, whatever its run says yet.
    get_redis().hset(worker.key, "last_heartbeat", utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    row = worker_row(client.get("/queues/").get_data(as_text=True), "worker-a")
    assert '<span class="badge running">busy</span>' in row


def test_an_idle_worker_silent_for_over_a_minute_is_lost_not_idle(client, auth):
    """Killed while idle, a worker read "idle" for the 8 minutes RQ keeps its key (last heartbeat 5 min ago)."""
    worker = SimpleWorker(["default", "retries"], connection=get_redis(), name="worker-a")
    worker.register_birth()
    worker.set_state("idle")
    auth.as_role("viewer")
    row = worker_row(client.get("/queues/").get_data(as_text=True), "worker-a")
    assert '<span class="badge ok">idle</span>' in row  # it beat just now
    get_redis().hset(worker.key, "last_heartbeat", (utcnow() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    page = client.get("/queues/").get_data(as_text=True)
    row = worker_row(page, "worker-a")
    assert '<span class="badge bad" title="Idle but silent for over a minute' in row and ">lost</span>" in row
    assert 'data-counter="workers">0<' in page and "No worker is running" in page


def test_tenant_limited_user_sees_no_link_to_another_tenants_run(client, auth):
    run, _ = submit(tenants.find("default"), Actor("test"), handler="demo.noop")
    busy_worker("worker-a", queueing.job_id(run.id, 1, 0))
    run.status, run.attempt, run.heartbeat_at = "running", 1, utcnow() + timedelta(seconds=30)
    globex = Tenant(name="globex")
    db.session.add(globex)
    db.session.commit()
    auth.make_user("gina", "viewer", tenant=globex)
    auth.login("gina")
    row = worker_row(client.get("/queues/").get_data(as_text=True), "worker-a")
    assert "another tenant's run" in row and f"/runs/{run.id}" not in row
    # The worker's liveness is shown (just now, through the run's beat), never which run it is.
    assert "just now" in row and "heartbeat</div>" not in row and f"run {run.id}" not in row
    # Nor how busy every tenant keeps the queues and workers: those counts are for people who see every tenant.
    page = client.get("/queues/").get_data(as_text=True)
    assert 'data-counter="waiting"><span class="subtle"' in page and "shown only to people who see every tenant" in page
    assert all(cell.startswith('<span class="subtle"') for cell in queue_row(page, "default")[1:7])


def test_no_worker_and_overdue_delayed_jobs_are_called_out(client, auth):
    queueing.enqueue_now(9001, 1, 0, 60)
    auth.as_role("viewer")
    page = client.get("/queues/").get_data(as_text=True)
    assert "No worker is running." in page and "No worker is registered with RQ." in page
    worker = SimpleWorker(["default"], connection=get_redis(), name="idle-one")
    worker.register_birth()
    queueing.enqueue_at(utcnow() - timedelta(minutes=2), 9002, 1, 1, 60)
    page = client.get("/queues/").get_data(as_text=True)
    assert worker_row(page, "idle-one") is not None
    assert "1 delayed job overdue." in page
    assert '<span class="badge bad">1 overdue</span>' in queue_row(page, "retries")[3]


def test_the_scheduler_leader_and_the_maintenance_schedule_are_shown(client, auth):
    auth.as_role("viewer")
    page = client.get("/queues/").get_data(as_text=True)
    assert "No scheduler holds the leader lock" in page
    get_redis().set(leader.KEY, "ops-host-2:4242:abcd1234", px=10_000)
    page = client.get("/queues/").get_data(as_text=True)
    assert re.search(r'<span class="badge ok">leading</span> <strong class="mono">ops-host-2</strong> · pid '
                     r'<span class="mono">4242</span> · lock <span class="mono">abcd1234</span>', page)
    assert "No scheduler holds the leader lock" not in page
    for job_id, every in (("reconcile", "30 s"), ("sla-check", "60 s")):
        assert re.search(rf"<strong>{job_id}</strong></td><td>{every}</td>", page)


def test_live_refresh_returns_only_the_region(client, auth):
    auth.as_role("viewer")
    fragment = client.get("/queues/", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="queues-live" hx-get="/queues/" hx-trigger="every 5s"')
    assert "<html" not in fragment



def test_page_says_redis_is_down_instead_of_failing(client, auth, redis_down):
    auth.as_role("viewer")
    response = client.get("/queues/")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert "Redis is unreachable, so queues and workers cannot be read." in page
    assert "ConnectionError" in page and "data-queue" not in page


def test_reading_the_workers_leaves_the_console_s_redis_answer_timeout_as_it_was(client, auth, redis_url):
    """RQ's Worker() raised the socket timeout of the client it is given to a worker's 415 s: once someone opened this
    page, a frozen Redis held every submit and /healthz for the whole outage instead of answering in 3 s."""
    own = redis.Redis.from_url(redis_url)  # the worker's client, as in its own process
    SimpleWorker(["default"], connection=own, name="w-timeout").register_birth()
    auth.as_role("viewer")
    page = client.get("/queues/").get_data(as_text=True)
    assert worker_row(page, "w-timeout") is not None
    assert get_redis().connection_pool.connection_kwargs["socket_timeout"] == ANSWER_TIMEOUT_S


def test_a_scheduler_whose_record_redis_lost_is_not_named_by_its_random_id(client, auth):
    from rq.scheduler import SCHEDULER_KEY_TEMPLATE, SCHEDULER_LOCKING_KEY_TEMPLATE

    connection = get_redis()
    connection.set(SCHEDULER_LOCKING_KEY_TEMPLATE % "default", "0fbd96d6df7443728560265220092dd6", ex=60)
    auth.as_role("viewer")
    page = client.get("/queues/").get_data(as_text=True)
    assert "an RQ scheduler in a worker (host not recorded; id 0fbd96d6)" in page
    connection.hset(SCHEDULER_KEY_TEMPLATE % "0fbd96d6df7443728560265220092dd6", mapping={"hostname": "h1", "pid": 7})
    assert "h1 · pid 7" in client.get("/queues/").get_data(as_text=True)


def test_a_live_worker_whose_job_ended_since_reads_idle_not_busy_with_it(client, auth):
    """A Redis restarted from its last snapshot gave back a job its worker had finished since: the page read "busy,
    run 4066" for ten minutes after that run had ended (helper 162)."""
    run, _ = submit(tenants.find("default"), Actor("test"), handler="demo.noop")
    worker = busy_worker("worker-a", queueing.job_id(run.id, 1, 0))
    worker.heartbeat()
    taken = (utcnow() - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    get_redis().hset(Job.key_for(queueing.job_id(run.id, 1, 0)), "started_at", taken)
    db.session.execute(db.update(type(run)).where(type(run).id == run.id).values(status="succeeded"))
    db.session.commit()
    auth.as_role("viewer")
    row = worker_row(client.get("/queues/").get_data(as_text=True), "worker-a")
    assert '<span class="badge' in row and ">idle</span>" in row and f'href="/runs/{run.id}"' not in row
    assert queue_row(client.get("/queues/").get_data(as_text=True), "default")[5] == "0"  # Running, as RQ counted 1


def test_a_worker_killed_in_a_job_that_is_no_runs_attempt_reads_lost_once_its_beat_is_silent(client, auth):
    """Killed in a bulk replay's slice, a worker read "busy" for eleven minutes (helper 170): such a job beats every
    5 s while it works (processes/worker.py), so a silent one is lost."""
    from rq import Queue

    job = Queue(queueing.MAINTENANCE_QUEUE, connection=get_redis()).enqueue("time.sleep", 60)
    worker = busy_worker("worker-a", job.id)
    auth.as_role("viewer")
    row = worker_row(client.get("/queues/").get_data(as_text=True), "worker-a")
    assert '<span class="badge running">busy</span>' in row  # it beat just now
    get_redis().hset(worker.key, "last_heartbeat", (utcnow() - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    page = client.get("/queues/").get_data(as_text=True)
    assert ">lost</span>" in worker_row(page, "worker-a") and 'data-counter="busy">0<' in page
