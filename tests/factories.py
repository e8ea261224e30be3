"""Factories: make the rows a test needs through the services, and look at runs the way the tests need."""

from sqlalchemy import select

from console.extensions import db
from console.models import DeadLetter, OutboxMessage, Run, RunEvent, Tenant, Workflow, WorkflowStep
from console.services.actor import Actor
from console.services.engine import compensation
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants, tokens
from console.services.recovery import runbook_runner, runbooks
from console.services.recovery.workflows import advance
from console.services.recovery.workflows.submit import submit as submit_workflow
from tests.helpers import wait_for


def make_tenant(name: str) -> Tenant:
    """Create a tenant with the default quotas."""
    tenant = Tenant(name=name)
    db.session.add(tenant)
    db.session.commit()
    return tenant


def bearer(user, tenant=None) -> dict:
    """Return the Authorization header of a new token acting as `user` (optionally limited to a tenant)."""
    _, plaintext = tokens.issue(user, Actor("test"), tenant=tenant)
    return {"Authorization": f"Bearer {plaintext}"}


class Runs:
    """Submit runs and look at them the way the tests need."""

    actor = Actor("test")

    def submit(self, handler: str = "demo.noop", params: dict | None = None, policy=None, tenant: str = "default",
               **kwargs) -> int:
        run, created = submit(tenants.find(tenant), self.actor, handler=handler, params=params, policy=policy,
                              **kwargs)
        assert created
        return run.id

    def get(self, run_id: int) -> Run:
        db.session.expire_all()
        return db.session.get(Run, run_id)

    def status(self, run_id: int) -> str:
        status = db.session.execute(select(Run.status).where(Run.id == run_id)).scalar_one()
        db.session.commit()
        return status

    def wait(self, run_id: int, *statuses: str, timeout_s: float = 30) -> Run:
        wait_for(lambda: self.status(run_id) in statuses, timeout_s, 0.05,
                 f"run {run_id} to become {' or '.join(statuses)} (it is {self.status(run_id)})")
        return self.get(run_id)

    def events(self, run_id: int, kind: str | None = None) -> list[RunEvent]:
        db.session.expire_all()
        query = select(RunEvent).where(RunEvent.run_id == run_id).order_by(RunEvent.id)
        if kind:
            query = query.where(RunEvent.kind == kind)
        return db.session.execute(query).scalars().all()

    def dead_letters(self, run_id: int) -> list[DeadLetter]:
        db.session.expire_all()
        return db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)
                                  .order_by(DeadLetter.id)).scalars().all()

    def outbox(self, kind: str | None = None) -> list[OutboxMessage]:
        db.session.expire_all()
        query = select(OutboxMessage).order_by(OutboxMessage.id)
        return db.session.execute(query.where(OutboxMessage.kind == kind) if kind else query).scalars().all()


# Recovery: saga workflows driven by hand, runbook executions run here, dead runs.

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
        workflow, created = submit_workflow(tenants.find(tenant), self.actor, name=name, steps=steps,
                                            idempotency_key=key, clock=self.clock)
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

    def two_failed(self) -> tuple[int, int]:
        """Two workflows whose step 3 failed for good, each asking step 2 to undo itself: the first one's undo
        succeeds, the second one's fails for good (a dead letter of a step that had succeeded). Return their ids."""
        undone = self.submit(three_steps(), key="order-1")
        stuck = self.submit(three_steps(second={"fail_times": 0, "undo_fail_times": 9}), key="order-2")
        for workflow_id in (undone, stuck):
            for position in (1, 2):
                self.execute(workflow_id, position)
                self.advance(workflow_id)
            assert self.execute(workflow_id, 3) == "dead"
            self.advance(workflow_id)
        assert (self.undo(undone, 2), self.undo(stuck, 2)) == ("compensated", "dead")
        return undone, stuck

    def events(self, *kinds: str, workflow_id: int | None = None) -> list[tuple[int, str]]:
        """Return (step, event kind) of the workflows' runs' events of these kinds, in the order they happened."""
        query = (select(Run.workflow_step, RunEvent.kind).join(Run, Run.id == RunEvent.run_id)
                 .where(Run.workflow_id.is_not(None), RunEvent.kind.in_(kinds)).order_by(RunEvent.id))
        if workflow_id is not None:
            query = query.where(Run.workflow_id == workflow_id)
        db.session.expire_all()
        return [tuple(row) for row in db.session.execute(query)]


RUNBOOK_SAMPLES = ["jobs.runbooks", "tests.recovery.sample_runbooks"]
# The execution's own bookkeeping: what a dry-run writes about itself, never about the system.
BOOKKEEPING = {"runbook_executions", "runbook_changes", "runbook_backups"}
LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}
BROKEN = {"fail_times": 9, "error": "fatal", "code": "bad_account", "message": "account 42 is closed"}


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
