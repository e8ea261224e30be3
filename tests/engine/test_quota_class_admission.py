"""A quota class's max_running holds across tasks and tenants: the run over it waits, no attempt spent, then runs."""

from sqlalchemy import text

from console.extensions import db
from console.models import Task
from console.services.actor import Actor
from console.services.engine import admission
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.scheduling import quota_classes
from console.services.scheduling import tasks as task_service
from tests.factories import make_tenant

ACTOR = Actor("test")


def task_in(name: str, tenant: str = "default", quota_class: str | None = "heavy-etl") -> Task:
    return task_service.register(tenants.find(tenant), {"name": name, "handler": "demo.noop", "template": None,
                                                        "quota_class": quota_class}, ACTOR)


def run_of(task: Task) -> int:
    run, created = submit(task.tenant, ACTOR, task=task)
    assert created
    return run.id


def set_status(run_id: int, status: str) -> None:
    # Another worker's run, as the database sees it (the claim under test reads only the database).
    db.session.execute(text("UPDATE runs SET status = :status, attempt = 1 WHERE id = :id"),
                       {"status": status, "id": run_id})
    db.session.commit()


def test_the_third_run_of_a_class_of_two_waits_with_the_reason_and_runs_when_a_slot_frees(runs, clock):
    make_tenant("acme")
    quota_classes.create("heavy-etl", 2, ACTOR)
    first, second = run_of(task_in("nightly-a")), run_of(task_in("nightly-b", tenant="acme"))
    third, unclassed = run_of(task_in("nightly-c")), run_of(task_in("other", quota_class=None))
    set_status(first, "running")
    set_status(second, "running")

    assert execute(third, 0, clock=clock) == "deferred:quota_class"
    run = runs.get(third)
    assert (run.status, run.attempt) == ("pending", 0)  # no attempt spent
    # The other tenant's task is counted, not named (the tenant wall).
    assert run.wait_reason == ("quota class heavy-etl: 2 of its 2 running slots in use "
                               "(tasks nightly-a; 1 of other tenants)")
    assert execute(unclassed, 0, clock=clock) == "succeeded"  # a task outside the class is not held back
    # Seen from acme, whose own task is not among them: counted in words, not "tasks 1 of other tenants".
    assert admission.class_tasks("heavy-etl", tenants.find("acme").id) == "tasks nightly-b; 1 of other tenants"
    set_status(second, "succeeded")
    assert admission.class_tasks("heavy-etl", tenants.find("acme").id) == "1 task of other tenants"
    set_status(second, "running")

    set_status(first, "succeeded")
    assert execute(third, 0, clock=clock) == "succeeded"
    assert runs.get(third).wait_reason is None


def test_raising_max_running_admits_the_waiting_run_at_its_next_claim(runs, clock):
    quota_classes.create("heavy-etl", 1, ACTOR)
    first, second = run_of(task_in("nightly-a")), run_of(task_in("nightly-b"))
    set_status(first, "running")
    assert execute(second, 0, clock=clock) == "deferred:quota_class"
    quota_classes.change("heavy-etl", ACTOR, max_running=2)
    assert execute(second, 0, clock=clock) == "succeeded"
