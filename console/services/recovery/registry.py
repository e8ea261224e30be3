"""Every kind of change that can wait for approval, by name."""

from console.services.recovery import bulk_discard, params_fix, run_compensation, runbook_approval
from console.services.recovery.kinds import FixKind

KINDS: dict[str, FixKind] = {kind.name: kind for kind in (params_fix.KIND, bulk_discard.KIND, run_compensation.KIND,
                                                          runbook_approval.KIND)}
