"""The console's navigation: each area, the endpoint it opens, the permission it needs, and what waits there."""

from collections.abc import Callable
from dataclasses import dataclass

from flask_login import current_user

from console.auth import tenant_scope
from console.domain.clock import utcnow
from console.domain.words import plural
from console.services.people.permissions import ADMIN, APPROVE, OPERATE, REPORT, VIEW, can
from console.services.recovery import approvals
from console.services.workorders import orders


def waiting_approvals() -> int | None:
    """Count the requests this person could decide now (approvers only)."""
    if not can(current_user.role, APPROVE):
        return None
    return approvals.waiting_for(current_user.id, tenant_scope(), utcnow())


def answered_requests() -> int | None:
    """Count the person's own requests answered since they last read them (people who may file requests only)."""
    if not can(current_user.role, OPERATE):
        return None
    return approvals.answered_since_seen(current_user, utcnow())


@dataclass(frozen=True)
class Waiting:
    """What waits for the person in an area: how many, and what, in words ("2 requests to decide")."""

    total: int
    words: str


def waiting_in_approvals() -> Waiting | None:
    """Count what waits for the person in Approvals: requests to decide and answers to their own to read."""
    return in_approvals(waiting_approvals(), answered_requests())


def waiting_in_work_orders() -> Waiting | None:
    """Count the work orders assigned to the person and not closed (people who may act on them only): a nav count
    for what is theirs, as Approvals has (helper 153)."""
    if not can(current_user.role, OPERATE):
        return None
    count = orders.assigned_active(current_user.id, tenant_scope())
    return Waiting(count, plural(count, "work order") + " assigned to you") if count else None


def in_approvals(decide: int | None, answered: int | None) -> Waiting | None:
    """Put the two counts of Approvals in one, with words (an operator read "2 waiting for you" and could decide
    none: helper 98); None for a person who has neither."""
    if decide is None and answered is None:
        return None
    parts = [plural(decide, "request") + " to decide" if decide else "",
             plural(answered, "answer") + " to read" if answered else ""]
    return Waiting((decide or 0) + (answered or 0), ", ".join(part for part in parts if part))


@dataclass(frozen=True)
class NavItem:
    label: str
    endpoint: str
    permission: str
    count: Callable[[], Waiting | None] | None = None  # shown beside the label when above zero
    also: tuple[str, ...] = ()  # other blueprints whose pages belong to this area

    def holds(self, blueprint: str | None) -> bool:
        """Tell whether a page of this blueprint is in this area (its link is then marked current)."""
        return blueprint == self.endpoint.split(".")[0] or blueprint in self.also


# The console's areas in order. One whose endpoint is not registered is not shown (see visible_nav).
NAV = [
    NavItem("Overview", "overview.index", VIEW),
    NavItem("Reports", "reports.index", REPORT),
    NavItem("Tasks", "tasks.index", VIEW, also=("conflict_templates",)),
    NavItem("Runs", "runs.index", VIEW),
    NavItem("DLQ", "dlq.index", VIEW),
    NavItem("Work orders", "workorders.index", VIEW, count=waiting_in_work_orders),
    # Everyone reads the requests there; approvers find what waits for them, operators the answers to their own,
    # counted.
    NavItem("Approvals", "approvals.index", VIEW, count=waiting_in_approvals),
    NavItem("Runbooks", "runbooks.index", VIEW),
    NavItem("Policies", "policies.index", VIEW),
    NavItem("Breakers", "breakers.index", VIEW),
    NavItem("Queues", "queues.index", VIEW),
    NavItem("Audit", "audit.index", VIEW),
    NavItem("Admin", "admin.users_index", ADMIN),
]
