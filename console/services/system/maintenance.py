"""The maintenance schedule, declared as data with stable ids."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Periodic:
    id: str
    func: str  # "module:function", called with no arguments inside an app context
    seconds: int
    description: str


MAINTENANCE: list[Periodic] = [
    Periodic("reconcile", "console.services.engine.reconcile:reconcile", 30,
             "Repair drift between the database and Redis"),
    Periodic("sla-check", "console.services.scheduling.sla:check", 60, "Record SLA breaches; escalate three in a row"),
    Periodic("alert-rules", "console.services.system.alert_rules:evaluate", 60,
             "Evaluate the alert rules: fire past a threshold, resolve below it"),
    Periodic("runbooks-reconcile", "console.services.recovery.runbook_reconcile:reconcile", 15,
             "Fail runbook executions whose worker died; queue those Redis lost; cancel those refused approval"),
    Periodic("approvals-expire", "console.services.recovery.approvals:expire_due", 60,
             "Expire approval requests nobody decided in time; they never run"),
    Periodic("params-fixes-supersede", "console.services.recovery.params_fix:supersede_settled", 15,
             "Close params fixes waiting for approval whose dead letter was replayed, discarded or resolved"),
    Periodic("bulk-discards-supersede", "console.services.recovery.bulk_discard:supersede_settled", 15,
             "Close bulk discards waiting for approval none of whose dead letters is open any more"),
    Periodic("compensations-supersede", "console.services.recovery.run_compensation:supersede_undone", 15,
             "Close requests to compensate a run that was undone another way meanwhile (its workflow's undo)"),
    Periodic("workflows", "console.services.recovery.workflows.advance:reconcile", 30,
             "Advance workflows whose advance job was lost (Redis is transport, the database the truth)"),
    Periodic("outbox", "console.services.system.delivery_round:tick", 2,
             "Close settled work orders; deliver alerts and work orders to their channels"),
    Periodic("rollups", "console.services.reports.rollup:tick", 60,
             "Recompute the report rollups of the hours since the last pass, and their days"),
    Periodic("bulk-replays-resume", "console.services.dlq.paced_replay:resume_stalled", 60,
             "Continue bulk replays whose worker died mid-way, from the last dead letter they replayed"),
    Periodic("event-receipts-expire", "console.services.scheduling.event_receipts:expire", 3600,
             "Forget what events sent with an idempotency key answered for tasks they did not fire, after a week"),
    Periodic("audit-anchor", "console.services.audit.anchors:tick", 30,
             "Publish the audit chain's head (seq and MAC) to the anchor file and the log, if it moved"),
]
