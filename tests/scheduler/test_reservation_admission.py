"""The planner and admission honour capacity reservations: a reserved slot is not given to another tenant."""

from datetime import timedelta

import pytest

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Tenant
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.errors import QueueFull
from console.services.people import tenants
from console.services.runs.waiting import why_waiting
from console.services.scheduling import planner, reservations
from tests.factories import bearer, make_tenant

BOSS = Actor("boss")


def _running(run_id: int) -> None:
    db.session.execute(db.text("UPDATE runs SET status = 'running', attempt = 1 WHERE id = :id"), {"id": run_id})
    db.session.commit()


def _reserve(clock, tenant: str, slots: int, hours: float = 1, queued: int = 0) -> dict:
    return reservations.create(tenant, BOSS, running_slots=slots, queued_runs=queued, starts_at=clock(),
                               ends_at=clock() + timedelta(hours=hours), reason="month-end", clock=clock)


def test_another_tenants_run_waits_while_the_reserved_slot_is_unused(app, runs, clock):
    app.config["CAPACITY_RUNNING"] = 2
    make_tenant("acme")
    make_tenant("globex")
    busy, waiting = runs.submit(tenant="acme"), runs.submit(tenant="acme")
    _running(busy)
    held = _reserve(clock, "globex", 1)
    assert execute(waiting, 0, clock=clock) == "deferred:reserved"
    reason = why_waiting(runs.get(waiting))
    assert reason.startswith("reserved capacity: 1 of the 2 promised running slots are in use and 1 more is "
                             "reserved by other tenants")
    assert "globex" not in reason  # the waiting tenant is not told who holds the slot
    # The holder's own run takes its reserved slot at once.
    assert execute(runs.submit(tenant="globex"), 0, clock=clock) == "succeeded"
    reservations.cancel(held["id"], BOSS, clock=clock)
    assert execute(waiting, 0, clock=clock) == "succeeded"


def test_the_slot_is_free_again_when_the_range_ends(app, runs, clock):
    app.config["CAPACITY_RUNNING"] = 2
    make_tenant("acme")
    make_tenant("globex")
    busy, waiting = runs.submit(tenant="acme"), runs.submit(tenant="acme")
    _running(busy)
    _reserve(clock, "globex", 1, hours=1)
    assert execute(waiting, 0, clock=clock) == "deferred:reserved"
    clock.advance(3600)
    assert execute(waiting, 0, clock=clock) == "succeeded"


def test_a_used_reserved_slot_holds_nothing_back(app, runs, clock):
    app.config["CAPACITY_RUNNING"] = 3
    make_tenant("acme")
    make_tenant("globex")
    _reserve(clock, "globex", 1)
    _running(runs.submit(tenant="globex"))
    _running(runs.submit(tenant="acme"))
    # Two of three slots run, globex uses all it reserved: the third slot is acme's to take.
    assert execute(runs.submit(tenant="acme"), 0, clock=clock) == "succeeded"


def test_during_a_reservation_the_tenants_quota_is_at_least_its_reserved_slots(app, runs, clock):
    tenant = make_tenant("globex")
    tenant.max_running = 1
    db.session.commit()
    _running(runs.submit(tenant="globex"))
    waiting = runs.submit(tenant="globex")
    assert execute(waiting, 0, clock=clock) == "deferred:quota"
    _reserve(clock, "globex", 2)
    assert execute(waiting, 0, clock=clock) == "succeeded"


def test_the_planner_queues_up_to_the_reserved_queued_runs(app, register, runs, clock):
    tenant = db.session.query(Tenant).filter_by(name="default").one()
    tenant.max_queued = 1
    db.session.commit()
    task = register()
    fire = lambda: planner.fire([planner.Firing(task.id, clock())], Actor("scheduler"), clock)[0]  # noqa: E731
    fire()
    clock.advance(60)
    assert runs.get(fire().run_id).status_reason == "quota"
    _reserve(clock, "default", 1, queued=5)
    clock.advance(60)
    assert runs.get(fire().run_id).status_reason is None


def test_a_submit_over_max_queued_is_taken_while_a_reservation_holds_queued_runs(app, clock):
    tenant = make_tenant("acme")
    tenant.max_queued = 1
    db.session.commit()
    submit(tenant, BOSS, handler="demo.noop", clock=clock)
    with pytest.raises(QueueFull):
        submit(tenant, BOSS, handler="demo.noop", clock=clock)
    _reserve(clock, "acme", 1, queued=2)
    submit(tenant, BOSS, handler="demo.noop", clock=clock)
    with pytest.raises(QueueFull) as refused:
        submit(tenant, BOSS, handler="demo.noop", clock=clock)
    assert refused.value.maximum == 2


def test_a_batch_submit_over_max_queued_is_taken_while_a_reservation_holds_queued_runs(app, client, auth):
    tenant = tenants.find("default")
    tenant.max_queued = 1
    db.session.commit()
    headers = bearer(auth.make_user("svc", "operator"))
    batch = [{"handler": "demo.noop"} for _ in range(3)]
    answers = client.post("/worker/tasks/batch", json={"runs": batch}, headers=headers).get_json()["runs"]
    assert [answer.get("created") for answer in answers] == [True, None, None]
    reservations.create("default", BOSS, running_slots=1, queued_runs=3, starts_at=utcnow(),
                        ends_at=utcnow() + timedelta(hours=1), reason="batch")
    answers = client.post("/worker/tasks/batch", json={"runs": batch}, headers=headers).get_json()["runs"]
    assert [answer.get("created") for answer in answers] == [True, True, None]
