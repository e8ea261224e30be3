"""Before an approved runbook runs for real, check it would change nothing its approver did not see in the preview."""

import json

from sqlalchemy import select

from console.extensions import db
from console.models import RunbookChange, RunbookExecution
from console.services.errors import Conflict
from console.services.recovery import approvals
from console.services.recovery.runbook_context import MAX_CHANGES, RunbookContext
from console.services.recovery.runbook_live import read_only

SHOWN = 3  # unseen changes named in the refusal; the execution's log lists them all


def _same_numbers(value):
    """Return the value with whole-number floats as ints: a JSON column gives 9.0 back as 9 (an extension developer's
    walk had 'amount → 9.0' refused as unseen beside a preview of 9)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _same_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_same_numbers(item) for item in value]
    return value


def _key(change: dict) -> tuple:
    # The "before" may differ (a row moved on in a way that leaves the same result): what was approved is the result.
    return (change["object"], str(change["object_id"]), change["field"],
            json.dumps(_same_numbers(change["after"]), sort_keys=True))


def _words(change: dict) -> str:
    return f"{change['object'].replace('_', ' ')} #{change['object_id']} {change['field']} → {change['after']}"


def check(runbook, execution: RunbookExecution, ctx: RunbookContext) -> None:
    """Dry-run the runbook as things stand now; raise Conflict (nothing has run) if it would make a change the
    approved preview did not list. Fewer changes are fine: rows that moved on need nothing more."""
    planned = db.session.execute(select(RunbookChange.object, RunbookChange.object_id, RunbookChange.field,
                                        RunbookChange.after).where(RunbookChange.execution_id == execution.id,
                                                                   RunbookChange.planned.is_(True))).all()
    if len(planned) >= MAX_CHANGES:
        ctx.log(f"The preview listed {MAX_CHANGES} changes or more: what it would change now is not compared with it.")
        return
    approved = {_key(row._asdict()) for row in planned}
    now = RunbookContext(execution.id, dry_run=True, tenant_id=ctx.tenant_id, actor=ctx.actor, reason=ctx.reason,
                         params=ctx.params, clock=ctx.clock, sleep=lambda seconds: None, monotonic=ctx.monotonic,
                         requested_at=ctx.asked_at)
    with read_only():
        runbook.run(now)
    found = now.recorded()
    unseen = [change for change in found if _key(change) not in approved]
    if unseen:
        for change in unseen:
            ctx.log(f"Not in the approved preview: {_words(change)}")
        named = "; ".join(_words(change) for change in unseen[:SHOWN])
        more = f" and {len(unseen) - SHOWN} more" if len(unseen) > SHOWN else ""
        # Since the preview the approver read, not since the approval: what moved may have moved before it.
        refused = (f"nothing ran: things moved on since the preview request #{execution.approval_id} was approved on, "
                   "and run now it "
                   f"would also make {len(unseen)} change{'s' if len(unseen) != 1 else ''} its approver never saw "
                   f"({named}{more}). Ask again: a new preview shows what it would do now")
        approvals.fail_executed(execution.approval_id, refused, ctx.now)  # the request says so, not only the run
        raise Conflict(refused, "status")
    ctx.log(f"Checked against the approved preview: {len(found)} of its {len(approved)} changes still to make, "
            "none it did not list.")
