"""The console's navigation: each area, the endpoint it opens and the permission it needs."""

from dataclasses import dataclass

from console.services.people.permissions import ADMIN, REPORT, VIEW


@dataclass(frozen=True)
class NavItem:
    label: str
    endpoint: str
    permission: str


# The console's areas in order. One whose endpoint is not registered is not shown (see visible_nav).
NAV = [
    NavItem("Overview", "overview.index", VIEW),
    NavItem("Reports", "reports.index", REPORT),
    NavItem("Tasks", "tasks.index", VIEW),
    NavItem("Runs", "runs.index", VIEW),
    NavItem("DLQ", "dlq.index", VIEW),
    NavItem("Work orders", "workorders.index", VIEW),
    NavItem("Policies", "policies.index", VIEW),
    NavItem("Breakers", "breakers.index", VIEW),
    NavItem("Queues", "queues.index", VIEW),
    NavItem("Audit", "audit.index", VIEW),
    NavItem("Admin", "admin.users_index", ADMIN),
]
