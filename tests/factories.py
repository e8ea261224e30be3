"""Factories: make the rows a test needs through the services, and look at runs the way the tests need."""

from sqlalchemy import select

from console.extensions import db
from console.models import DeadLetter, OutboxMessage, Run, RunEvent, Tenant
from console.services.actor import Actor
from console.services.engine.submit import submit
from console.services.people import tenants, tokens, users
from tests.helpers import PASSWORD, wait_for


def make_tenant(name: str) -> Tenant:
    """Create a tenant with the default quotas."""
    tenant = Tenant(name=name)
    db.session.add(tenant)
    db.session.commit()
    return tenant


def make_user(username: str, role: str, tenant=None):
    """Create a user with the tests' password."""
    user, _ = users.create(username, role, PASSWORD, Actor("test"), tenant=tenant)
    return user


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
        return db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)).scalars().all()

    def outbox(self, kind: str | None = None) -> list[OutboxMessage]:
        db.session.expire_all()
        query = select(OutboxMessage).order_by(OutboxMessage.id)
        return db.session.execute(query.where(OutboxMessage.kind == kind) if kind else query).scalars().all()
