"""Which role may do what; one table, checked by one decorator."""

from console.models import Role

VIEW, OPERATE, APPROVE, REPORT, ADMIN = "view", "operate", "approve", "report", "admin"
# Rolling an approved change back needs APPROVE; a refusal names the act instead ("may not approve" misleads).
ROLL_BACK = "roll a change back (that needs the approve permission)"

# What a refusal says each permission lets a role do ("may not report" read as a verb nobody uses).
DOING = {VIEW: "view this", OPERATE: "operate (replay, discard, change tasks and policies)", APPROVE: "approve",
         REPORT: "read reports", ADMIN: "administer (people, tokens, tenants, channels)"}

GRANTS: dict[str, frozenset[str]] = {
    Role.VIEWER: frozenset({VIEW}),
    Role.OPERATOR: frozenset({VIEW, OPERATE}),
    Role.APPROVER: frozenset({VIEW, OPERATE, APPROVE}),
    Role.MANAGER: frozenset({VIEW, REPORT}),
    Role.ADMIN: frozenset({VIEW, OPERATE, APPROVE, REPORT, ADMIN}),
}


def can(role: str, permission: str) -> bool:
    """Tell whether a role holds a permission."""
    return permission in GRANTS.get(role, frozenset())
