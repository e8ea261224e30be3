"""Purge finished runs older than a cut-off: each goes to a JSON-lines export first, then is deleted with its rows."""

from datetime import datetime

from sqlalchemy import delete, exists, select

from console.extensions import db
from console.models import AttemptDiagnostics, DeadLetter, Run, RunEvent, SlaBreach
from console.services.system import exports

RUNS = Run.__table__
ID = RUNS.c.id
# Dead too: one whose dead letters were all discarded is settled business (an open letter keeps it, below); before,
# such runs stayed for good, with their timelines and diagnostics (helper 131).
FINISHED = ("succeeded", "cancelled", "compensated", "resolved", "dead")
# The rows that belong to a run and go with it (into its export line first).
CHILDREN = (RunEvent.__table__, AttemptDiagnostics.__table__, DeadLetter.__table__, SlaBreach.__table__)


def _others() -> list:
    """Return every other column that points at a run: a run something else still names is kept."""
    owned = {table.name for table in CHILDREN}
    return [fk.parent for table in db.metadata.sorted_tables if table.name not in owned
            for fk in table.foreign_keys if fk.column.table is RUNS]


def purgeable(cutoff: datetime, tenant_id: int | None):
    """Select the ids a purge with this cut-off would remove (one tenant's, or every tenant's for None)."""
    query = select(RUNS.c.id).where(RUNS.c.status.in_(FINISHED), RUNS.c.finished_at < cutoff)
    if tenant_id is not None:
        query = query.where(RUNS.c.tenant_id == tenant_id)
    # A run with a dead letter still open is not finished business, whatever its status.
    query = query.where(~exists().where(DeadLetter.run_id == RUNS.c.id, DeadLetter.status == "open"))
    for column in _others():
        query = query.where(~exists().where(column == RUNS.c.id))
    return query


def export_and_delete(run_ids: list[int], cutoff: datetime, out) -> list[dict]:
    """In the caller's transaction: write each run still purgeable to `out` (one JSON line with its rows, synced to
    disk), then delete it and its rows. Return the runs as exported; the caller commits, or truncates `out` and rolls
    back."""
    # A run that leaves its finished status meanwhile (a compensation asked for) stays.
    runs = exports.hold(RUNS, run_ids, RUNS.c.status.in_(FINISHED) & (RUNS.c.finished_at < cutoff), touch="updated_at")
    if not runs:
        return []
    held = [run["id"] for run in runs]
    connection = db.session.connection()
    children: dict[str, dict[int, list[dict]]] = {}
    for table in CHILDREN:
        rows = connection.execute(select(table).where(table.c.run_id.in_(held)).order_by(table.c.id))
        for row in rows:
            children.setdefault(table.name, {}).setdefault(row.run_id, []).append(exports.plain(row))
    exports.write_synced(out, [{"run": run, **{table.name: children.get(table.name, {}).get(run["id"], [])
                                               for table in CHILDREN}} for run in runs])
    for table in CHILDREN:
        connection.execute(delete(table).where(table.c.run_id.in_(held)))
    connection.execute(delete(RUNS).where(RUNS.c.id.in_(held)))
    return runs
