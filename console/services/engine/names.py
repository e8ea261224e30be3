"""The names an attempt shows its handler and its log: tenants and policies remembered, tasks read each time."""

import functools

from sqlalchemy import bindparam, select

from console.extensions import db
from console.models import RetryPolicyRecord, Task, Tenant

_TASK_NAME = select(Task.name).where(Task.id == bindparam("task_id"))


def tenant(tenant_id: int) -> str:
    """Return a tenant's name."""
    return _tenant_in(str(db.engine.url), tenant_id)


@functools.lru_cache(maxsize=1024)
def _tenant_in(database: str, tenant_id: int) -> str:
    # Tenants are never renamed, so a process may remember their names (per database: tests use many).
    return db.session.execute(select(Tenant.name).where(Tenant.id == tenant_id)).scalar_one()


def policy(policy_id: int) -> str:
    """Return a retry policy's name."""
    return _policy_in(str(db.engine.url), policy_id)


@functools.lru_cache(maxsize=256)
def _policy_in(database: str, policy_id: int) -> str:
    # Policies are never renamed (their versions change, not their names).
    return db.session.execute(select(RetryPolicyRecord.name).where(RetryPolicyRecord.id == policy_id)).scalar_one()


def task(task_id: int | None) -> str | None:
    """Return a task's name as it is now (None for a run of no task)."""
    # Read per attempt, not remembered: a task may be renamed.
    if task_id is None:
        return None
    return db.session.connection().execute(_TASK_NAME, {"task_id": task_id}).scalar_one_or_none()
