"""Recovery fixtures: saga workflows driven by hand, the test runbooks registered, people, dead runs, and a
snapshot of every table."""

import pytest
import redis as redis_client
from sqlalchemy import select

from console.extensions import db
from console.models import Run, RunEvent, Workflow, WorkflowStep
from console.services.actor import Actor
from console.services.engine import compensation
from console.services.engine.execute import execute
from console.services.people import tenants, users
from console.services.recovery import runbook_registry, runbook_runner, runbooks
from console.services.recovery.workflows import advance
from console.services.recovery.workflows.submit import submit
from tests.engine.conftest import Runs, workers  # noqa: F401 - the real RQ workers fixture, shared

OK = {"fail_times": 0}
FATAL = {"fail_times": 9, "error": "fatal", "code": "carrier_rejected", "message": "carrier rejected parcel 7"}
UNDO_FAILS_ONCE = {"fail_times": 0, "undo_fail_times": 1}


def three_steps(second=UNDO_FAILS_ONCE, third=FATAL, first_handler="demo.flaky_compensated") -> list[dict]:
    """Reserve, charge, ship: the third fails non-retryably unless told otherwise."""
    return [{"handler": first_handler, "params": OK},
            {"handler": "demo.flaky_compensated", "params": second},
            {"handler": "demo.flaky", "params": third}]


class Saga:
    """Submit workflows and look at them the way the tests need."""

    actor = Actor("olga")

    def __init__(self, clock):
        self.clock = clock

    def submit(self, steps, key: str = "order-7", tenant: str = "default", name: str = "ship order 7") -> int:
        workflow, created = submit(tenants.find(tenant), self.actor, name=name, steps=steps, idempotency_key=key,
                                   clock=self.clock)
        assert created
        return workflow.id

    def get(self, workflow_id: int) -> Workflow:
        db.session.expire_all()
        return db.session.get(Workflow, workflow_id)

    def status(self, workflow_id: int) -> str:
        return self.get(workflow_id).status

    def steps(self, workflow_id: int) -> list[WorkflowStep]:
        db.session.expire_all()
        return db.session.execute(select(WorkflowStep).where(WorkflowStep.workflow_id == workflow_id)
                                  .order_by(WorkflowStep.position)).scalars().all()

    def run(self, workflow_id: int, position: int) -> Run | None:
        db.session.expire_all()
        return db.session.execute(select(Run).where(Run.workflow_id == workflow_id,
                                                    Run.workflow_step == position)).scalar_one_or_none()

    def runs(self, workflow_id: int) -> list[Run]:
        db.session.expire_all()
        return db.session.execute(select(Run).where(Run.workflow_id == workflow_id)
                                  .order_by(Run.workflow_step)).scalars().all()

    def execute(self, workflow_id: int, position: int) -> str:
        """Run the step's current attempt here, as a worker would."""
        run = self.run(workflow_id, position)
        return execute(run.id, run.attempt, clock=self.clock)

    def undo(self, workflow_id: int, position: int) -> str:
        """Run the step's compensation job here, as a worker would."""
        return compensation.execute(self.run(workflow_id, position).id, clock=self.clock)

    def advance(self, workflow_id: int) -> str:
        return advance.advance(workflow_id, clock=self.clock)

    def events(self, *kinds: str, workflow_id: int | None = None) -> list[tuple[int, str]]:
        """Return (step, event kind) of the workflows' runs' events of these kinds, in the order they happened."""
        query = (select(Run.workflow_step, RunEvent.kind).join(Run, Run.id == RunEvent.run_id)
                 .where(Run.workflow_id.is_not(None), RunEvent.kind.in_(kinds)).order_by(RunEvent.id))
        if workflow_id is not None:
            query = query.where(Run.workflow_id == workflow_id)
        db.session.expire_all()
        return [tuple(row) for row in db.session.execute(query)]


@pytest.fixture
def saga(app, clock):
    return Saga(clock)


@pytest.fixture
def runs(app):
    return Runs()


SAMPLES = ["jobs.runbooks", "tests.recovery.sample_runbooks"]
# The execution's own bookkeeping: what a dry-run writes about itself, never about the system.
BOOKKEEPING = {"runbook_executions", "runbook_changes", "runbook_backups"}
LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}
BROKEN = {"fail_times": 9, "error": "fatal", "code": "bad_account", "message": "account 42 is closed"}


@pytest.fixture
def samples(app):
    """Register the test runbooks beside the shipped ones (workers get REBOUND_RUNBOOK_MODULES)."""
    app.config["RUNBOOK_MODULES"] = SAMPLES
    runbook_registry.init_app(app)
    yield ",".join(SAMPLES)
    app.config["RUNBOOK_MODULES"] = ["jobs.runbooks"]
    runbook_registry.init_app(app)


@pytest.fixture
def staff(app):
    """An operator, two approvers and an admin, as the actors services see."""
    made = {}
    for name, role in (("olga", "operator"), ("alex", "approver"), ("bea", "approver"), ("ada", "admin")):
        user, _ = users.create(name, role, "correct-horse-battery", Actor("test"))
        made[name] = Actor(name, user.id)
    return made


@pytest.fixture
def dead_run(app, clock):
    """Make a run of tenant `tenant` dead (a non-retryable failure) and return (run id, its dead letter id)."""
    runs = Runs()

    def make(tenant: str = "default", **params) -> tuple[int, int]:
        run_id = runs.submit("demo.flaky", {**BROKEN, **params}, policy=LENIENT, tenant=tenant)
        assert execute(run_id, 0, clock=clock) == "dead"
        (letter,) = runs.dead_letters(run_id)
        return run_id, letter.id

    return make


@pytest.fixture
def snapshot(redis_url):
    """Return every table's rows (but the executions' own bookkeeping) and Redis's keys, to compare before/after."""
    connection = redis_client.Redis.from_url(redis_url)

    def take() -> dict:
        db.session.commit()
        with db.engine.connect() as conn:
            tables = {table.name: sorted(map(repr, conn.execute(select(table)).all()))
                      for table in db.metadata.sorted_tables if table.name not in BOOKKEEPING}
        keys = sorted(connection.keys())
        return {"tables": tables, "redis": {key: connection.type(key) for key in keys}}

    return take


def run_now(name: str, params: dict, actor: Actor, *, clock, dry_run: bool = False, scope=None, tenant=None,
            reason=None):
    """File an execution and run it here, as the CLI does; return it as stored afterwards."""
    execution = runbooks.start(name, params, actor, scope=scope, tenant=tenant, dry_run=dry_run, reason=reason,
                               clock=clock, enqueue=False)
    runbook_runner.execute(execution.id, clock=clock, sleep=lambda seconds: None)
    db.session.expire_all()
    return runbooks.get(execution.id)


def changes_of(execution, planned: bool) -> list[tuple]:
    rows, _ = runbooks.changes(execution.id, planned=planned)
    return [(row.object, row.object_id, row.field, row.before, row.after) for row in rows]
