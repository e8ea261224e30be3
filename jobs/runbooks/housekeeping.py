"""Runbooks that keep the system tidy: purge old finished runs (exported first), the engine's reconcile."""

from datetime import timedelta

from console.domain.runbooks import Param, Risk
from console.domain.runbooks import ParamType as T
from console.extensions import db
from console.services.audit import trail as audit
from console.services.engine import reconcile as reconciling
from console.services.recovery.runbook_registry import Runbook
from console.services.runs import purge as purging
from console.services.settings import setting

CHUNK = 200


def purge_finished_runs(ctx) -> None:
    """Export finished runs older than N days (with timelines and dead letters) to JSON lines, then delete them."""
    days, limit = ctx.params["older_than_days"], ctx.params["limit"]
    cutoff = ctx.asked_at - timedelta(days=days)
    total = purging.count(cutoff, ctx.tenant_id)
    wanted = min(total, limit) if limit else total
    path = purging.export_path(setting("DATA_DIR"), ctx.execution_id)
    ctx.log(f"{total} finished run(s) ({', '.join(purging.FINISHED[:-1])}, or {purging.FINISHED[-1]} with no dead "
            f"letter open) finished before {cutoff:%Y-%m-%d %H:%M} UTC"
            + (f"; purging the oldest {wanted}" if wanted < total else "") + ".")
    if not wanted:
        return
    if ctx.dry_run:
        after_id = seen = 0
        while seen < wanted:
            ids = purging.next_ids(cutoff, ctx.tenant_id, after_id, min(1000, wanted - seen))
            if not ids:
                break
            for run_id in ids:
                ctx.change("run", run_id, "row", "finished", "deleted (exported)")
            after_id, seen = ids[-1], seen + len(ids)
        ctx.log(f"Would export {seen} run(s) with their timelines and dead letters to {path}, then delete them.")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    purged = 0
    with path.open("a", encoding="utf-8") as out:
        while purged < wanted:
            ids = purging.next_ids(cutoff, ctx.tenant_id, 0, min(CHUNK, wanted - purged))
            if not ids:
                break
            mark = out.tell()
            try:
                runs = purging.export_and_delete(ids, cutoff, out)
                for run in runs:
                    ctx.change("run", run["id"], "row", run["status"], "deleted (exported)")
                ctx.commit()
            except BaseException:
                out.truncate(mark)  # the export holds exactly what was deleted
                raise
            if not runs:
                break
            purged += len(runs)
            ctx.log(f"Exported and deleted {purged} of {wanted}.")
    ctx.backup("export", path, {"runs": purged, "format": "one JSON object per line: run, run_events, dead_letters, "
                                                          "sla_breaches"})
    audit.record(db.session, ctx.actor, "run.purge", "runbook_execution", ctx.execution_id,
                 after={"runs": purged, "older_than_days": days, "export": str(path)}, note=ctx.reason,
                 clock=ctx.clock)
    ctx.commit()
    ctx.log(f"{purged} run(s) purged; the export is {path}.")


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


PURGE = Runbook(
    "purge_finished_runs", "Purge old finished runs",
    "Delete finished runs (succeeded, cancelled, compensated, resolved, and dead ones whose dead letters are all "
    "discarded) older than N days with their timelines, "
    "closed dead letters and SLA records, after writing each to a JSON-lines export in the data dir.", Risk.HIGH, (
        Param("older_than_days", T.INT, required=True, minimum=1, maximum=3650,
              help="Purge runs that finished more than this many days ago."),
        Param("limit", T.INT, minimum=1, help="Purge at most this many (the oldest ids); all when empty."),
    ), purge_finished_runs)

RECONCILE = Runbook(
    "engine_reconcile", "Reconcile the engine",
    "Re-queue runs whose job Redis lost, queue overdue retries, fail attempts whose worker died, drop jobs of "
    "finished runs, re-queue lost compensations. The scheduler runs this every 30 s; run it now after an incident.",
    Risk.LOW, (), engine_reconcile, scope="system")
