"""What admits an attempt: the policy version in force and the running counts, read with the run in one query."""

import dataclasses
import functools
from dataclasses import dataclass

from sqlalchemy import bindparam, case, func, select

from console.db import locks
from console.domain.words import plural
from console.extensions import db
from console.models import QuotaClass, Reservation, RetryPolicyRecord, Run, Task, Tenant
from console.models.runs import status_is
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
    # The run's task's quota class, its max_running and how many runs of its tasks run now (None without a class).
    quota_class: str | None = None
    class_max_running: int | None = None
    class_running: int | None = None


@functools.lru_cache(maxsize=1)
def _run_and_admission():
    """Build once (this runs on every attempt) the query of a run with what admits it, in one round trip."""
    runs, tenants, reservations = Run.__table__, Tenant.__table__, Reservation.__table__
    policies_, tasks, classes = RetryPolicyRecord.__table__, Task.__table__, QuotaClass.__table__
    run = runs.alias("run")
    # The run's task's class, and the running runs of every task in it (any tenant): by tasks.quota_class's index.
    # Correlated to the run explicitly: it is also nested two levels deep, where auto-correlation does not reach.
    task_class = select(tasks.c.quota_class).where(tasks.c.id == run.c.task_id).correlate(run).scalar_subquery()
    peers = tasks.alias("peer")  # an alias: the class lookup inside must not correlate to this join's tasks
    class_running = (select(func.count()).select_from(runs.join(peers, peers.c.id == runs.c.task_id))
                     .where(status_is("running", runs.c.status), peers.c.quota_class == task_class).scalar_subquery())
    # The status as a constant in the SQL: the counts read the partial indexes of live runs (models/runs.py).
    running = select(func.count()).select_from(runs).where(status_is("running", runs.c.status))
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
        task_class.label("a_quota_class"),
        select(classes.c.max_running).where(classes.c.name == task_class).scalar_subquery()
        .label("a_class_max_running"),
        # Counted only for a run whose task has a class (CASE evaluates the branch it takes).
        case((task_class.is_not(None), class_running)).label("a_class_running"),
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


# How a run waiting on a limit's slots is explained: its page shows it; a deferral tells by it whether the run was
# already waiting on its class, and a claim by it which older runs wait for the same slots.
CLASS_WAIT = "quota class "
CAPACITY_WAIT = "policy capacity: "
QUOTA_WAIT = "tenant quota: "


# A limit with fewer free slots than this is counted again under its lock before a claim takes one, so workers
# claiming at once never take more than its last slot: exact for every limit up to it (concurrency 1 is a mutex). With
# more free, a claim counts without the lock, which keeps it off the hot path (the default concurrency is 10); it could
# overshoot by one only if its worker stalled between its count and its claim while others took all those slots.
EXACT_SLOTS = 4


def over_capacity(admission: Admission, concurrency: int) -> str | None:
    """Name the limit that is full (the task's concurrency or the tenant's max_running), if any."""
    if admission.own_running >= concurrency:
        return "concurrency"
    if admission.class_max_running is not None and admission.class_running >= admission.class_max_running:
        return "quota_class"
    # During a reservation the tenant's quota is at least the running slots it reserved.
    limit = max(admission.max_running, admission.reserved_running)
    return "quota" if admission.tenant_running >= limit else None


def near_a_limit(admission: Admission, concurrency: int) -> bool:
    """Tell whether a limit has fewer than EXACT_SLOTS free: the claim must count again under its lock."""
    free = [concurrency - admission.own_running,
            max(admission.max_running, admission.reserved_running) - admission.tenant_running]
    if admission.class_max_running is not None:
        free.append(admission.class_max_running - admission.class_running)
    return min(free) < EXACT_SLOTS


def queued_ahead(run, admission: Admission, concurrency: int) -> tuple[str, int] | None:
    """Name a limit whose free slots older runs waiting for it take first, and how many wait: slots go oldest first.

    Counted only near a limit, under its lock (a deferred run asks again each second, so without this the first to ask
    after a slot frees takes it, and the oldest can wait for minutes). At most as many rows as there are free slots
    are read, so a long queue costs each claim little.
    """
    limits = [("concurrency", concurrency - admission.own_running,
               (Run.task_id == run.task_id) if run.task_id is not None
               else (Run.task_id.is_(None)) & (Run.handler == run.handler), CAPACITY_WAIT),
              ("quota", max(admission.max_running, admission.reserved_running) - admission.tenant_running,
               Run.tenant_id == run.tenant_id, QUOTA_WAIT)]
    if admission.class_max_running is not None:
        in_class = Run.task_id.in_(select(Task.id).where(Task.quota_class == admission.quota_class))
        limits.append(("quota_class", admission.class_max_running - admission.class_running, in_class,
                       f"{CLASS_WAIT}{admission.quota_class}:"))
    for limit, free, scope, wait in limits:
        older = (select(Run.id).where(scope, status_is("pending"), Run.id < run.id,
                                      Run.wait_reason.startswith(wait, autoescape=True)).limit(free).subquery())
        ahead = db.session.execute(select(func.count()).select_from(older)).scalar_one()
        if ahead >= free:
            return limit, ahead
    return None


def hold_limits(tenant_id: int, task_id: int | None, handler: str, quota_class: str | None) -> None:
    """Hold, to the commit, the locks of the limits a claim counts against; always in this order, so claims of runs
    that share some of them never deadlock."""
    if quota_class is not None:
        locks.hold(f"running:class:{quota_class}")
    locks.hold(f"running:task:{task_id}" if task_id is not None else f"running:handler:{handler}")
    locks.hold(f"running:tenant:{tenant_id}")


def explain(full: str, admission: Admission, concurrency: int, *, tenant: str, policy: str, handler: str,
            by_task: bool, tenant_id: int | None = None, ahead: int = 0) -> str:
    """Say in words which limit holds a run back, for its page (`full` as over_capacity or queued_ahead named it)."""
    # Counted only up to the free slots (what the claim needs to know), so not "1 older run" when six wait.
    first = "; older runs waiting for it go first" if ahead else ""
    if full == "quota_class":
        running = class_tasks(admission.quota_class, tenant_id)
        return (f"{CLASS_WAIT}{admission.quota_class}: {admission.class_running} of its "
                f"{plural(admission.class_max_running, 'running slot')} in use ({running}){first}")
    if full == "quota":
        if admission.reserved_running > admission.max_running:
            return (f"{QUOTA_WAIT}tenant {tenant} is running {admission.tenant_running} of the "
                    f"{plural(admission.reserved_running, 'running slot')} it reserved for now{first}")
        return (f"{QUOTA_WAIT}tenant {tenant} is running {admission.tenant_running} of its max_running "
                f"{admission.max_running}{first}")
    # A run without a task shares its policy's concurrency with every run of its handler, in every tenant.
    scope = "this task" if by_task else f"handler {handler}, counted across every tenant"
    return (f"{CAPACITY_WAIT}policy {policy} lets {concurrency} run at once for {scope}; "
            f"{admission.own_running} running{first}")


def class_tasks(name: str, tenant_id: int, shown: int = 5) -> str:
    """Name the running tasks of a class, "tasks a, b; 2 of other tenants": the run's tenant's by name, others' only
    counted (the tenant wall)."""
    rows = db.session.execute(
        select(Task.tenant_id, Task.name).where(Task.quota_class == name,
                                                Task.id.in_(select(Run.task_id).where(Run.status == "running")))
        .order_by(Task.name)).all()
    own = [task for tenant, task in rows if tenant == tenant_id]
    others = len(rows) - len(own)
    if not own:  # "1 task of other tenants", not "tasks 1 of other tenants"
        return f"{plural(others, 'task')} of other tenants"
    words = "tasks " + ", ".join(own[:shown]) + (" …" if len(own) > shown else "")
    return words + (f"; {others} of other tenants" if others else "")
