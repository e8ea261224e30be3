"""Workflow fixtures: submit workflows, drive their steps by hand, and read back what happened."""

import pytest
from sqlalchemy import select

from console.extensions import db
from console.models import Run, RunEvent, Workflow, WorkflowStep
from console.services.actor import Actor
from console.services.engine import compensation
from console.services.engine.execute import execute
from console.services.people import tenants
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
