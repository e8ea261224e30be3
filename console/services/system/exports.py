"""JSON-lines exports of rows a purge deletes: one line per object, synced to disk before the delete commits."""

import json
import os
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select, update

from console.extensions import db


def export_path(data_dir: str, kind: str, execution_id: int | str) -> Path:
    """Name the export of one purge (`purged-runs-7.jsonl`), in the data dir; a dry-run names `<execution>`."""
    return Path(data_dir) / "exports" / f"purged-{kind}-{execution_id}.jsonl"


def plain(row) -> dict:
    """Return a row's columns as JSON-ready values (times in ISO form)."""
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in row._mapping.items()}


def write_synced(out, lines: list[dict]) -> None:
    """Write one JSON line per object and sync the file: the export holds them before they are deleted."""
    for line in lines:
        out.write(json.dumps(line, default=str, ensure_ascii=False) + "\n")
    out.flush()
    os.fsync(out.fileno())


def count_of(ids) -> int:
    """Count the rows a select of ids finds."""
    return db.session.execute(select(func.count()).select_from(ids.subquery())).scalar_one()


def ids_after(ids, column, after_id: int, limit: int) -> list[int]:
    """Return the next ids of a select after after_id, ascending."""
    return list(db.session.execute(ids.where(column > after_id).order_by(column).limit(limit)).scalars())


def hold(table, ids: list[int], still, touch: str) -> list[dict]:
    """In the caller's transaction: take the rows of `ids` that still match `still` and return them, by id.

    A no-op write to `touch` takes the rows (PostgreSQL) or the write lock (SQLite) before they are read, so a row
    that moves on meanwhile (a run asked to compensate, a message resent) is neither exported nor deleted."""
    if not ids:
        return []
    connection = db.session.connection()
    held = connection.execute(update(table).where(table.c.id.in_(ids), still)
                              .values({touch: table.c[touch]}).returning(table.c.id)).scalars().all()
    if not held:
        return []
    return [plain(row) for row in connection.execute(select(table).where(table.c.id.in_(held)).order_by(table.c.id))]
