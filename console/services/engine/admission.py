"""What admits an attempt: the policy version in force and the running counts, read in one prebuilt query."""

import functools
from dataclasses import dataclass

from sqlalchemy import bindparam, func, select

from console.extensions import db
from console.models import Reservation, Run, Tenant
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


@functools.lru_cache(maxsize=4)
def _admission_query(by_policy_id: bool, by_task: bool):
    """Build once (this runs on every attempt) the admission query for runs with/without a policy and a task."""
    runs, tenants, reservations = Run.__table__, Tenant.__table__, Reservation.__table__
    in_force = policies.IN_FORCE_BY_ID if by_policy_id else policies.IN_FORCE_DEFAULT
    same_work = runs.c.task_id == bindparam("task_id") if by_task else runs.c.handler == bindparam("handler")
    running = select(func.count()).select_from(runs).where(runs.c.status == "running")
    reserved = select(func.count()).select_from(reservations).where(
        reservations.c.cancelled_at.is_(None), reservations.c.starts_at <= bindparam("now"),
        reservations.c.ends_at > bindparam("now"))
    return select(
        in_force.with_only_columns(in_force.selected_columns.id).scalar_subquery(),
        in_force.with_only_columns(in_force.selected_columns.current_version).scalar_subquery(),
        running.where(same_work).scalar_subquery(),
        running.where(runs.c.tenant_id == bindparam("tenant_id")).scalar_subquery(),
        select(tenants.c.max_running).where(tenants.c.id == bindparam("tenant_id")).scalar_subquery(),
        reserved.with_only_columns(func.coalesce(func.sum(reservations.c.running_slots), 0))
        .where(reservations.c.tenant_id == bindparam("tenant_id")).scalar_subquery(),
        reserved.scalar_subquery())


def read(run, now) -> Admission:
    """Read what admits this attempt: the policy version in force and the running counts, in one query."""
    query = _admission_query(run.policy_id is not None, run.task_id is not None)
    row = db.session.connection().execute(query, {"policy_id": run.policy_id, "task_id": run.task_id,
                                                  "handler": run.handler, "tenant_id": run.tenant_id,
                                                  "now": now}).one()
    return Admission(*row)


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
