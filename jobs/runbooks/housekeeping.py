"""Runbooks that keep the system tidy: purge old finished runs and settled messages (exported first), the engine's
reconcile."""

from dataclasses import dataclass
from datetime import timedelta
from types import ModuleType

from console.domain.runbooks import Param, Risk
from console.domain.runbooks import ParamType as T
from console.extensions import db
from console.services.audit import trail as audit
from console.services.delivery import purge as message_purge
from console.services.engine import reconcile as reconciling
from console.services.recovery.runbook_registry import Runbook
from console.services.runs import purge as run_purge
from console.services.settings import setting
from console.services.system import exports

CHUNK = 200


@dataclass(frozen=True)
class Purged:
    """What a purge takes, in the words of its log, its change list and its export."""

    purging: ModuleType  # purgeable(cutoff, tenant_id), ID, export_and_delete(ids, cutoff, out)
    what: str  # "runs": the export's name (purged-runs-7.jsonl) and the count's key
    obj: str  # each change's object, and the audit action's ("run.purge")
    before: str  # a change's "before", in a dry run
    found: str  # "… before <cut-off>", the first line of the log
    kept_with: str  # "their timelines, dead letters and SLA records"
    line: str  # the keys of each export line


RUNS = Purged(run_purge, "runs", "run", "finished",
              f"finished run(s) ({', '.join(run_purge.FINISHED[:-1])}, or {run_purge.FINISHED[-1]} with no dead letter "
              "open) finished", "their timelines, attempts' diagnostics, dead letters and SLA records",
              ", ".join(["run", *(table.name for table in run_purge.CHILDREN)]))
MESSAGES = Purged(message_purge, "messages", "outbox_message", "settled",
                  f"settled message(s) ({' or '.join(message_purge.SETTLED)}) created", "their delivery attempts",
                  "message, deliveries")


def _purge(ctx, kind: Purged) -> None:
    """Export then delete, a chunk per transaction, what `kind` finds past the params' age (counted from the
    request); a dry run lists it. The export holds exactly what was deleted."""
    purging, what, obj = kind.purging, kind.what, kind.obj
    days, limit = ctx.params["older_than_days"], ctx.params["limit"]
    cutoff = ctx.asked_at - timedelta(days=days)
    found = purging.purgeable(cutoff, ctx.tenant_id)
    total = exports.count_of(found)
    wanted = min(total, limit) if limit else total
    path = exports.export_path(setting("DATA_DIR"), what, ctx.execution_id)
    ctx.log(f"{total} {kind.found} before {cutoff:%Y-%m-%d %H:%M} UTC"
            + (f"; purging the oldest {wanted}" if wanted < total else "") + ".")
    if not wanted:
        return
    if ctx.dry_run:
        after_id = seen = 0
        while seen < wanted:
            ids = exports.ids_after(found, purging.ID, after_id, min(1000, wanted - seen))
            if not ids:
                break
            for object_id in ids:
                ctx.change(obj, object_id, "row", kind.before, "deleted (exported)")
            after_id, seen = ids[-1], seen + len(ids)
        # Named after the real run's execution, not this dry-run's (it named a file no run would write; helper 160).
        named = exports.export_path(setting("DATA_DIR"), what, "<execution>")
        ctx.log(f"Would export {seen} {what} with {kind.kept_with} to {named} (named after the real run's "
                "execution), then delete them.")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    purged = 0
    with path.open("a", encoding="utf-8") as out:
        while purged < wanted:
            ids = exports.ids_after(found, purging.ID, 0, min(CHUNK, wanted - purged))
            if not ids:
                break
            mark = out.tell()
            try:
                rows = purging.export_and_delete(ids, cutoff, out)
                for row in rows:
                    ctx.change(obj, row["id"], "row", row["status"], "deleted (exported)")
                ctx.commit()
            except BaseException:
                out.truncate(mark)  # the export holds exactly what was deleted
                raise
            if not rows:
                break
            purged += len(rows)
            ctx.log(f"Exported and deleted {purged} of {wanted}.")
    ctx.backup("export", path, {what: purged, "format": f"one JSON object per line: {kind.line}"})
    audit.record(db.session, ctx.actor, f"{obj}.purge", "runbook_execution", ctx.execution_id,
                 after={what: purged, "older_than_days": days, "export": str(path)}, note=ctx.reason,
                 clock=ctx.clock)
    ctx.commit()
    ctx.log(f"{purged} {what} purged; the export is {path}.")


def purge_finished_runs(ctx) -> None:
    """Export finished runs older than N days (with timelines and dead letters) to JSON lines, then delete them."""
    _purge(ctx, RUNS)


def purge_settled_messages(ctx) -> None:
    """Export delivered and skipped alert and work-order messages older than N days to JSON lines, then delete them."""
    _purge(ctx, MESSAGES)


LISTS = {
    "requeued": ("run", "job", "missing", "queued"),
    "retries_enqueued": ("run", "retry job", "missing", "queued"),
    "lost_workers": ("run", "status", "running", "failed attempt (worker_lost)"),
    "dropped_jobs": ("job", "queue", "queued", "removed"),
    "compensations_requeued": ("run", "compensation job", "missing", "queued"),
}


def engine_reconcile(ctx) -> None:
    """Repair drift between the database and Redis now, as the scheduler does every 30 s."""
    report = reconciling.reconcile(ctx.clock, dry_run=ctx.dry_run)
    for name, (obj, field, before, after) in LISTS.items():
        for item in getattr(report, name):
            ctx.change(obj, item, field, before, after)
    ctx.commit()
    counts = report.as_dict()
    found = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in counts.items() if count)
    ctx.log(("Would repair: " if ctx.dry_run else "Repaired: ") + (found or "nothing, the database and Redis agree."))


AGE = Param("older_than_days", T.INT, required=True, minimum=1, maximum=3650,
            help="Purge what finished or was created more than this many days before the request.")
LIMIT = Param("limit", T.INT, minimum=1, help="Purge at most this many (the oldest ids); all when empty.")

PURGE = Runbook(
    "purge_finished_runs", "Purge old finished runs",
    "Delete finished runs (succeeded, cancelled, compensated, resolved, and dead ones whose dead letters are all "
    "discarded) older than N days with their timelines, attempts' diagnostics (tracebacks, log lines), "
    "closed dead letters and SLA records, after writing each to a JSON-lines export in the data dir.", Risk.HIGH,
    (AGE, LIMIT), purge_finished_runs)

PURGE_MESSAGES = Runbook(
    "purge_settled_messages", "Purge old alert and work-order messages",
    "Delete the outbox's alert, escalation and work-order messages older than N days that were delivered, or skipped "
    "for want of a channel, with their delivery attempts, after writing each to a JSON-lines export in the data dir. "
    "Failed messages stay until someone resends them; the alert latency a report rebuild reads goes with them.",
    Risk.MEDIUM, (AGE, LIMIT), purge_settled_messages)

RECONCILE = Runbook(
    "engine_reconcile", "Reconcile the engine",
    "Re-queue runs whose job Redis lost, queue overdue retries, fail attempts whose worker died, drop jobs of "
    "finished runs, re-queue lost compensations. The scheduler runs this every 30 s; run it now after an incident.",
    Risk.LOW, (), engine_reconcile, scope="system")
