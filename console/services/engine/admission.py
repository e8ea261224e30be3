"""What admits an attempt: the policy version in force and the running counts, read with the run in one query."""

import dataclasses
import functools
from dataclasses import dataclass

from sqlalchemy import bindparam, case, func, select

from console.extensions import db
from console.models import Reservation, RetryPolicyRecord, Run, Tenant
from console.services.policies import versions as policies


@dataclass(frozen=True)
class Admission:
    """What an attempt is admitted by, read in one query: the policy version in force and the running counts."""

    policy_id: int | None
    policy_version: int | None
    own_running: int
    tenant_running: int
    max_running: int
    # Running slots this tenant's reservations hold now, and how many reservations of any tenant are in force.
    reserved_running: int = 0
    reservations: int = 0


@functools.lru_cache(maxsize=1)
def _run_and_admission():
    """Build once (this runs on every attempt) the query of a run with what admits it, in one round trip."""
    runs, tenants, reservations = Run.__table__, Tenant.__table__, Reservation.__table__
    policies_ = RetryPolicyRecord.__table__
    run = runs.alias("run")
    running = select(func.count()).select_from(runs).where(runs.c.status == "running")
    reserved = select(func.count()).select_from(reservations).where(
        reservations.c.cancelled_at.is_(None), reservations.c.starts_at <= bindparam("now"),
        reservations.c.ends_at > bindparam("now"))

    def in_force(column):
        # CASE evaluates only the branch it takes, so each branch keeps its own index.
        return case((run.c.policy_id.is_(None),
                     select(column).where(policies_.c.name == policies.DEFAULT).scalar_subquery()),
                    else_=select(column).where(policies_.c.id == run.c.policy_id).scalar_subquery())

    return select(
        run,
        in_force(policies_.c.id).label("a_policy_id"),
        in_force(policies_.c.current_version).label("a_policy_version"),
        # A run of a task shares its concurrency with the task's runs; one without, with its handler's.
        case((run.c.task_id.is_(None), running.where(runs.c.handler == run.c.handler).scalar_subquery()),
             else_=running.where(runs.c.task_id == run.c.task_id).scalar_subquery()).label("a_own_running"),
        running.where(runs.c.tenant_id == run.c.tenant_id).scalar_subquery().label("a_tenant_running"),
        select(tenants.c.max_running).where(tenants.c.id == run.c.tenant_id).scalar_subquery()
        .label("a_max_running"),
        reserved.with_only_columns(func.coalesce(func.sum(reservations.c.running_slots), 0))
        .where(reservations.c.tenant_id == run.c.tenant_id).scalar_subquery().label("a_reserved_running"),
        reserved.scalar_subquery().label("a_reservations"),
    ).where(run.c.id == bindparam("run_id"))


ADMISSION_FIELDS = tuple(f"a_{field.name}" for field in dataclasses.fields(Admission))


def read(run_id: int, now) -> tuple[dict, Admission] | None:
    """Read a run's columns and what admits its attempt (policy version in force, running counts) in one query."""
    row = db.session.connection().execute(_run_and_admission(), {"run_id": run_id, "now": now}).one_or_none()
    if row is None:
        return None
    columns = dict(row._mapping)
    admitted = Admission(*(columns.pop(name) for name in ADMISSION_FIELDS))
    return columns, admitted


def over_capacity(admission: Admission, concurrency: int) -> str | None:
    """Name the limit that is full (the task's concurrency or the tenant's max_running), if any."""
    # Counted, then claimed: two workers racing may overshoot by one; the limits are for load, not safety.
    if admission.own_running >= concurrency:
        return "concurrency"
    # During a reservation the tenant's quota is at least the running slots it reserved.
    limit = max(admission.max_running, admission.reserved_running)
    return "quota" if admission.tenant_running >= limit else None


def explain(full: str, admission: Admission, concurrency: int, *, tenant: str, policy: str, handler: str,
            by_task: bool) -> str:
    """Say in words which limit holds a run back, for its page (`full` as over_capacity named it)."""
    if full == "quota":
        if admission.reserved_running > admission.max_running:
            return (f"tenant quota: tenant {tenant} is running {admission.tenant_running} of the "
                    f"{admission.reserved_running} running slots it reserved for now")
        return (f"tenant quota: tenant {tenant} is running {admission.tenant_running} of its max_running "
                f"{admission.max_running}")
    # A run without a task shares its policy's concurrency with every run of its handler, in every tenant.
    scope = "this task" if by_task else f"handler {handler}, counted across every tenant"
    return (f"policy capacity: policy {policy} lets {concurrency} run at once for {scope}; "
            f"{admission.own_running} running")
