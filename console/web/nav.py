"""The console's navigation: each area, the endpoint it opens and the permission it needs."""

from dataclasses import dataclass

from console.auth.permissions import ADMIN, VIEW


@dataclass(frozen=True)
class NavItem:
    label: str
    endpoint: str
    permission: str


# Areas appear here as they are built; a link to a page that does not exist is worse than none.
NAV = [
    NavItem("Overview", "overview.index", VIEW),
    NavItem("Audit", "audit.index", VIEW),
    NavItem("Admin", "admin.users_index", ADMIN),
]
