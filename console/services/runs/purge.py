"""Purge finished runs older than a cut-off: each goes to a JSON-lines export first, then is deleted with its rows."""

import json
import os
from datetime import datetime
from pathlib import Path

from sqlalchemy import delete, exists, func, select, update

from console.extensions import db
from console.models import AttemptDiagnostics, DeadLetter, Run, RunEvent, SlaBreach

RUNS = Run.__table__
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


def _purgeable(cutoff: datetime, tenant_id: int | None):
    query = select(RUNS.c.id).where(RUNS.c.status.in_(FINISHED), RUNS.c.finished_at < cutoff)
    if tenant_id is not None:
        query = query.where(RUNS.c.tenant_id == tenant_id)
    # A run with a dead letter still open is not finished business, whatever its status.
    query = query.where(~exists().where(DeadLetter.run_id == RUNS.c.id, DeadLetter.status == "open"))
    for column in _others():
        query = query.where(~exists().where(column == RUNS.c.id))
    return query


def count(cutoff: datetime, tenant_id: int | None) -> int:
    """Count the runs a purge with this cut-off would remove."""
    return db.session.execute(select(func.count()).select_from(_purgeable(cutoff, tenant_id).subquery())).scalar_one()


def next_ids(cutoff: datetime, tenant_id: int | None, after_id: int, limit: int) -> list[int]:
    """Return the next purgeable run ids after after_id, ascending."""
    return list(db.session.execute(_purgeable(cutoff, tenant_id).where(RUNS.c.id > after_id)
                                   .order_by(RUNS.c.id).limit(limit)).scalars())


def export_path(data_dir: str, execution_id: int) -> Path:
    """Name the export of one purge, in the data dir."""
    return Path(data_dir) / "exports" / f"purged-runs-{execution_id}.jsonl"


def _plain(row) -> dict:
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in row._mapping.items()}


def export_and_delete(run_ids: list[int], cutoff: datetime, out) -> list[dict]:
    """In the caller's transaction: write each run still purgeable to `out` (one JSON line with its rows, synced to
    disk), then delete it and its rows. Return the runs as exported; the caller commits, or truncates `out` and rolls
    back."""
    if not run_ids:
        return []
    connection = db.session.connection()
    # A no-op write first: it takes the rows (PostgreSQL) or the write lock (SQLite) before they are read, so a run
    # that leaves its finished status meanwhile (a compensation asked for) is neither exported nor deleted.
    held = connection.execute(update(RUNS).where(RUNS.c.id.in_(run_ids), RUNS.c.status.in_(FINISHED),
                                                 RUNS.c.finished_at < cutoff)
                              .values(updated_at=RUNS.c.updated_at).returning(RUNS.c.id)).scalars().all()
    if not held:
        return []
    runs = [_plain(row) for row in connection.execute(select(RUNS).where(RUNS.c.id.in_(held)).order_by(RUNS.c.id))]
    children: dict[str, dict[int, list[dict]]] = {}
    for table in CHILDREN:
        rows = connection.execute(select(table).where(table.c.run_id.in_(held)).order_by(table.c.id))
        for row in rows:
            children.setdefault(table.name, {}).setdefault(row.run_id, []).append(_plain(row))
    for run in runs:
        line = {"run": run, **{table.name: children.get(table.name, {}).get(run["id"], []) for table in CHILDREN}}
        out.write(json.dumps(line, default=str, ensure_ascii=False) + "\n")
    out.flush()
    os.fsync(out.fileno())
    for table in CHILDREN:
        connection.execute(delete(table).where(table.c.run_id.in_(held)))
    connection.execute(delete(RUNS).where(RUNS.c.id.in_(held)))
    return runs
