"""A freed slot goes to the oldest run waiting for it, whichever waiting run asks first."""

from datetime import timedelta

from console.extensions import db
from console.services.actor import Actor
from console.services.engine import claim
from console.services.engine.execute import execute
from console.services.people import tenants
from console.services.scheduling import planner, quota_classes
from console.services.scheduling import tasks as task_service
from tests.engine.test_quota_class_admission import set_status
from tests.factories import make_tenant

ACTOR = Actor("test")


def _waiting_in_turn(runs, clock, holder: int, older: int, newer: int, limit: str) -> None:
    """Both waiters are put off while the holder runs; then the newer asks first after the slot frees."""
    set_status(holder, "running")
    assert execute(older, 0, clock=clock) == f"deferred:{limit}"
    assert execute(newer, 0, clock=clock) == f"deferred:{limit}"
    set_status(holder, "succeeded")
    clock.advance(1)

    assert execute(newer, 0, clock=clock) == f"deferred:{limit}"
    assert runs.get(newer).wait_reason.endswith("; older runs waiting for it go first")
    assert execute(older, 0, clock=clock) == "succeeded"
    assert execute(newer, 0, clock=clock) == "succeeded"  # its turn once the older one is done


def test_a_policys_freed_slot_goes_to_the_older_waiting_run(runs, clock):
    holder, older, newer = (runs.submit("demo.noop", policy={"concurrency": 1}) for _ in range(3))
    _waiting_in_turn(runs, clock, holder, older, newer, "concurrency")


def test_a_tenants_freed_slot_goes_to_the_older_waiting_run(runs, clock):
    tenant = make_tenant("acme")
    tenant.max_running = 1
    db.session.commit()
    holder, older, newer = (runs.submit(tenant="acme") for _ in range(3))
    _waiting_in_turn(runs, clock, holder, older, newer, "quota")


def test_a_quota_classs_freed_slot_goes_to_the_older_waiting_run(runs, clock):
    quota_classes.create("heavy-etl", 1, ACTOR)
    made = [task_service.register(tenants.find("default"), {
        "name": name, "handler": "demo.noop", "cron": "0 * * * *", "template": None, "quota_class": "heavy-etl"},
        ACTOR) for name in ("etl-a", "etl-b", "etl-c")]
    at = clock().replace(second=0, microsecond=0)
    fired = {outcome.task_id: outcome.run_id
             for outcome in planner.fire([planner.Firing(task.id, at) for task in made], ACTOR, clock)}
    holder, older, newer = (fired[task.id] for task in made)
    _waiting_in_turn(runs, clock, holder, older, newer, "quota_class")


def test_older_runs_waiting_for_another_limit_do_not_hold_a_run_back(runs, clock):
    tenant = make_tenant("acme")
    tenant.max_running = 1
    db.session.commit()
    make_tenant("globex")
    busy, waits_for_its_tenant = runs.submit(tenant="acme"), runs.submit(tenant="acme")
    set_status(busy, "running")
    assert execute(waits_for_its_tenant, 0, clock=clock) == "deferred:quota"
    # A run of another tenant, of a handler with free slots: the acme run waits for acme's quota, not for these slots.
    assert execute(runs.submit(tenant="globex"), 0, clock=clock) == "succeeded"


def test_a_slot_free_beyond_the_older_waiting_runs_is_taken_at_once(runs, clock):
    holder, older, newer = (runs.submit("demo.noop", policy={"concurrency": 2}) for _ in range(3))
    set_status(holder, "running")
    assert execute(older, 0, clock=clock) == "succeeded"  # one slot left: nobody waits for it
    extra = runs.submit("demo.noop", policy={"concurrency": 2})
    set_status(extra, "running")
    assert execute(newer, 0, clock=clock) == "deferred:concurrency"
    newest = runs.submit("demo.noop", policy={"concurrency": 2})
    set_status(extra, "succeeded")
    set_status(holder, "succeeded")
    # Two slots free, one older run waiting: the newest takes the second at once.
    assert execute(newest, 0, clock=clock) == "succeeded"
    assert execute(newer, 0, clock=clock) == "succeeded"


def test_a_claim_near_a_limit_records_its_start_after_waiting_for_the_limits_locks(runs, clock):
    # Under load a claim read its time, waited for the locks while an older run started and finished, and recorded
    # a start before that run's: the newer seemed to have gone first (seen under four test workers on PostgreSQL).
    run_id = runs.submit("demo.noop", policy={"concurrency": 1})
    asked = clock()
    waited = iter([asked])  # the claim's first reading; every later one is after the wait

    def waiting_clock():
        return next(waited, None) or clock()

    clock.advance(5)
    assert claim.claim(run_id, 0, waiting_clock, "worker-1")[0].id == run_id
    assert runs.get(run_id).started_at == asked + timedelta(seconds=5)
