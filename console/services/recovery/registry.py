"""Every kind of change that can wait for approval, by name."""

from console.services.recovery import params_fix, runbook_approval
from console.services.recovery.kinds import FixKind

KINDS: dict[str, FixKind] = {kind.name: kind for kind in (params_fix.KIND, runbook_approval.KIND)}
