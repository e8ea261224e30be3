"""Keep what each `task-dryrun` forecast named, so the conflicts that then happen can be checked against it."""

from datetime import datetime

from sqlalchemy import insert
from sqlalchemy.dialects import postgresql, sqlite

from console.extensions import db
from console.models import ForecastWarning
from console.services.scheduling.forecast import Forecast

BATCH = 1_000


def record(result: Forecast, made_at: datetime) -> int:
    """Store the forecast's conflicts; one already named by an earlier forecast keeps its earlier time."""
    rows = [{"kind": kind, "tenant_id": tenant_id, "task_id": task_id, "at": at, "made_at": made_at}
            for kind, tenant_id, task_id, at in sorted(set(result.warnings))]
    dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(db.engine.dialect.name)
    # "One per key" is the unique index, not a read first: two forecasts at once cannot both insert it.
    statement = dialect.insert(ForecastWarning.__table__).on_conflict_do_nothing() if dialect else insert(
        ForecastWarning.__table__)
    for start in range(0, len(rows), BATCH):
        db.session.execute(statement, rows[start:start + BATCH])
    db.session.commit()
    return len(rows)
