"""Whose settings a breaker holds runs back by: the policy that opened it, and the policies whose runs share it."""

import json
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.exc import NoResultFound

from console.domain.breaker import BreakerState, Opener
from console.domain.words import plural
from console.extensions import db
from console.models import RetryPolicyRecord, Run, Task
from console.models.runs import live
from console.services.engine.breakers import BreakerKey
from console.services.errors import NotFound
from console.services.policies import versions as policies

# How many live runs (and tasks) of a handler are read for the policies they use: a backlog repeats the same few.
USERS_READ_CAP = 1_000


@dataclass(frozen=True)
class PolicyBreaker:
    """One policy's breaker settings, named for people: w2-breaker v2 (2 failures in a row, open 120 s)."""

    policy: str  # its name and version: "w2-breaker v2"
    failure_threshold: int
    open_s: int

    @property
    def settings(self) -> str:
        return f"{plural(self.failure_threshold, 'failure')} in a row, open {self.open_s} s"

    def __str__(self) -> str:
        return f"{self.policy} ({self.settings})"


def policy_label(policy_id: int | None, version: int, overridden: bool = False) -> str:
    """Name a policy version: "w2-breaker v2" (`default` for no policy), "… with overrides" for a run's own changes."""
    name = policies.DEFAULT if policy_id is None else db.session.execute(
        select(RetryPolicyRecord.name).where(RetryPolicyRecord.id == policy_id)).scalar_one_or_none()
    return f"{name or f'policy #{policy_id}'} v{version}" + (" with overrides" if overridden else "")


def opener(state: BreakerState) -> PolicyBreaker | None:
    """Name the policy whose settings opened this breaker; None if it is closed or its opening named none."""
    found: Opener | None = state.opened_by
    if found is None or found.policy_id is None or found.policy_version is None:
        return None
    # The opening run's own overrides are not kept, but settings other than its version's say there were some: "policy
    # default v1 (1 failure in a row, open 86400 s)" blamed a policy for a run's override (helper 152).
    try:
        named = policies.of_version(found.policy_id, found.policy_version, None)
        overridden = (named.breaker_failure_threshold, named.breaker_open_s) != (found.failure_threshold, found.open_s)
    except NoResultFound:  # its version is gone: say what is known
        overridden = False
    return PolicyBreaker(policy_label(found.policy_id, found.policy_version, overridden), found.failure_threshold,
                         found.open_s)


def in_use(key: BreakerKey, opened_by: PolicyBreaker | None) -> list[PolicyBreaker]:
    """Return the policies whose runs count against this breaker (live runs, tasks, its opener), by name."""
    found = {opened_by.policy: opened_by} if opened_by else {}
    for policy_id, overrides in _users(key):
        try:
            version, policy = policies.effective(policy_id, overrides)
        except NotFound:
            continue
        if policy.breaker_scope == key.scope:
            label = policy_label(policy_id, version, bool(overrides))
            found.setdefault(label, PolicyBreaker(label, policy.breaker_failure_threshold, policy.breaker_open_s))
    return [found[label] for label in sorted(found)]


def _users(key: BreakerKey) -> list[tuple[int | None, dict]]:
    """Return each (policy id, overrides) that live runs and tasks of the breaker's handler (and tenant) use."""
    runs = select(Run.policy_id, Run.policy_overrides).where(Run.handler == key.handler, live())
    tasks = select(Task.policy_id, Task.policy_overrides).where(Task.handler == key.handler, Task.deleted_at.is_(None))
    if key.tenant_id is not None:
        runs, tasks = runs.where(Run.tenant_id == key.tenant_id), tasks.where(Task.tenant_id == key.tenant_id)
    used: dict[tuple, tuple[int | None, dict]] = {}
    for query in (runs, tasks):
        for policy_id, overrides in db.session.execute(query.limit(USERS_READ_CAP)):
            used.setdefault((policy_id, json.dumps(overrides or {}, sort_keys=True)), (policy_id, overrides or {}))
    return list(used.values())
