"""What the console shows beside a retry policy: who uses it, how it changed, and its backoff schedule."""

from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select

from console.domain.policy import RetryPolicy, retry_schedule
from console.extensions import db
from console.models import PolicyVersion, RetryPolicyRecord, Task, Tenant
from console.services.policies import versions as policies

HISTORY_PAGE = 50


@dataclass(frozen=True)
class PolicyRow:
    """One line of the policy list: the policy, its version in force, and how many tasks use it."""

    record: RetryPolicyRecord
    version: PolicyVersion
    tasks: int

    @property
    def spec(self) -> dict:
        return self.version.spec


def overview(scope: int | None) -> list[PolicyRow]:
    """List every policy with its current version and its task count (tasks of `scope` only, if given)."""
    rows = db.session.execute(
        select(RetryPolicyRecord, PolicyVersion)
        .join(PolicyVersion, and_(PolicyVersion.policy_id == RetryPolicyRecord.id,
                                  PolicyVersion.version == RetryPolicyRecord.current_version))
        .order_by(RetryPolicyRecord.name)).all()
    counts = task_counts(scope)
    default_id = next((record.id for record, _ in rows if record.name == policies.DEFAULT), None)
    # A task without a policy runs under `default`, so it counts there.
    counts[default_id] = counts.get(default_id, 0) + counts.pop(None, 0)
    return [PolicyRow(record, version, counts.get(record.id, 0)) for record, version in rows]


def task_counts(scope: int | None) -> dict[int | None, int]:
    """Count live tasks per policy id (None: tasks that name no policy)."""
    query = select(Task.policy_id, func.count()).where(Task.deleted_at.is_(None)).group_by(Task.policy_id)
    if scope is not None:
        query = query.where(Task.tenant_id == scope)
    return dict(db.session.execute(query).all())


def _uses(record: RetryPolicyRecord):
    if record.name == policies.DEFAULT:
        return or_(Task.policy_id == record.id, Task.policy_id.is_(None))
    return Task.policy_id == record.id


def tasks_using(record: RetryPolicyRecord, scope: int | None, limit: int = 200) -> list[Task]:
    """Return the live tasks that run under this policy, by name (at most `limit`)."""
    query = select(Task).where(_uses(record), Task.deleted_at.is_(None)).order_by(Task.name).limit(limit)
    if scope is not None:
        query = query.where(Task.tenant_id == scope)
    return db.session.execute(query).scalars().all()


@dataclass(frozen=True)
class Deadline:
    """The SLA deadline a policy's retries must fit in, and whose it is."""

    seconds: int
    source: str  # "policy" or "task"
    task: str | None = None
    tenant: str | None = None


def tightest_task_deadline(record: RetryPolicyRecord | None, scope: int | None) -> Deadline | None:
    """Return the smallest sla.deadline_s among the live tasks that use this policy, if any has one."""
    if record is None:
        return None
    query = (select(Task.name, Task.sla, Tenant.name).join(Tenant, Tenant.id == Task.tenant_id)
             .where(_uses(record), Task.deleted_at.is_(None), Task.sla.is_not(None))
             .order_by(Tenant.name, Task.name))  # a tie names the same task on every database
    if scope is not None:
        query = query.where(Task.tenant_id == scope)
    best = None
    for task, sla, tenant in db.session.execute(query):
        deadline = (sla or {}).get("deadline_s")
        if deadline is not None and (best is None or deadline < best.seconds):
            best = Deadline(int(deadline), "task", task, tenant)
    return best


@dataclass(frozen=True)
class BackoffPreview:
    """The wait after each failed attempt, its totals, and whether they fit the SLA deadline."""

    policy: RetryPolicy
    schedule: list[dict]
    deadline: Deadline | None = None
    task_deadline: Deadline | None = None

    @property
    def nominal_total_s(self) -> float:
        return self.schedule[-1]["cumulative_nominal_s"] if self.schedule else 0.0

    @property
    def worst_total_s(self) -> float:
        return self.schedule[-1]["cumulative_high_s"] if self.schedule else 0.0

    @property
    def run_time_s(self) -> int:
        """The longest the attempts themselves may run: each up to timeout_s."""
        return self.policy.max_attempts * self.policy.timeout_s

    @property
    def exceeds_deadline(self) -> bool:
        """Tell whether the worst-case waits alone outlast the deadline."""
        return self.deadline is not None and self.worst_total_s > self.deadline.seconds

    @property
    def exceeds_with_run_time(self) -> bool:
        """Tell whether waits plus attempts running to their timeout outlast the deadline."""
        return self.deadline is not None and self.worst_total_s + self.run_time_s > self.deadline.seconds


def backoff_preview(spec: dict, record: RetryPolicyRecord | None = None, scope: int | None = None) -> BackoffPreview:
    """Validate a policy spec and preview its schedule against the tightest SLA deadline; raise InvalidInput."""
    policy = policies.validated(spec)
    task_deadline = tightest_task_deadline(record, scope)
    own = Deadline(policy.deadline_s, "policy") if policy.deadline_s is not None else None
    candidates = [d for d in (own, task_deadline) if d is not None]
    deadline = min(candidates, key=lambda d: d.seconds) if candidates else None
    return BackoffPreview(policy, retry_schedule(policy), deadline, task_deadline)


@dataclass(frozen=True)
class VersionChange:
    """One version of a policy and what it changed compared with the version before it."""

    version: PolicyVersion
    changes: list[tuple[str, object, object]]

    @property
    def created(self) -> bool:
        return self.version.version == 1


def spec_diff(old: dict | None, new: dict) -> list[tuple[str, object, object]]:
    """List (field, old, new) for every field whose value differs, in the new spec's field order."""
    # A field added since a version was saved reads as the default that version ran under, not as a change.
    old, new = policies.normalized(old) if old else {}, policies.normalized(new)
    keys = list(new) + [key for key in old if key not in new]
    return [(key, old.get(key), new.get(key)) for key in keys if old.get(key) != new.get(key)]


def history(record: RetryPolicyRecord, before: int | None = None,
            limit: int = HISTORY_PAGE) -> tuple[list[VersionChange], int | None]:
    """Return versions newest first (below `before`), each with its diff, and the cursor of the next page."""
    query = select(PolicyVersion).where(PolicyVersion.policy_id == record.id)
    if before is not None:
        query = query.where(PolicyVersion.version < before)
    # One extra row: the predecessor of the oldest shown version, for its diff.
    rows = db.session.execute(query.order_by(PolicyVersion.version.desc()).limit(limit + 1)).scalars().all()
    shown = rows[:limit]
    changes = []
    for index, version in enumerate(shown):
        previous = rows[index + 1] if index + 1 < len(rows) else None
        changes.append(VersionChange(version, spec_diff(previous.spec if previous else None, version.spec)))
    return changes, shown[-1].version if len(rows) > limit else None
