"""Rollups for reports (per task per hour, summed per day) and the task-dryrun forecasts they are judged against.

The rollups are plain Core tables: their many count columns (one per histogram bucket) come from the bucket
edges in console/domain/histograms.py, and only the rollup job writes them.
"""

from sqlalchemy import Column, Index, Integer, SmallInteger, String, Table, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from console.db.types import UTCDateTime
from console.domain.figures import MEASURES
from console.extensions import db

# Who a row counts for. task_id 0 is runs submitted without a task (grouped by tenant and handler); task_id -1
# (ALL_TASKS, handler "") is the sum of a tenant's other rows of that hour or day, so a report over every task
# reads one row per tenant and day instead of one per task.
KEY_COLUMNS = ("tenant_id", "task_id", "handler")
ALL_TASKS = -1
ERROR_KEY_COLUMNS = ("tenant_id", "task_id", "fingerprint")


def _counts(names) -> list[Column]:
    return [Column(name, Integer, nullable=False, default=0) for name in names]


report_hours = Table(
    "report_hours", db.metadata,
    Column("hour", UTCDateTime, primary_key=True),
    Column("tenant_id", Integer, primary_key=True),
    Column("task_id", Integer, primary_key=True),
    Column("handler", String(120), primary_key=True),
    # The heat map (task x hour of day) groups by it without a date function per dialect.
    Column("hour_of_day", SmallInteger, nullable=False),
    *_counts(MEASURES),
    # The heat map's and the tenant totals' seek; covering the heat map's columns, so it never reads the wide row.
    Index("ix_report_hours_task_hour", "task_id", "hour", "hour_of_day", "starts", "on_time"),
)

report_days = Table(
    "report_days", db.metadata,
    Column("day", UTCDateTime, primary_key=True),
    Column("tenant_id", Integer, primary_key=True),
    Column("task_id", Integer, primary_key=True),
    Column("handler", String(120), primary_key=True),
    *_counts(MEASURES),
    Index("ix_report_days_task_day", "task_id", "day"),
)

# Dead letters per error fingerprint, for "top error fingerprints".
report_error_hours = Table(
    "report_error_hours", db.metadata,
    Column("hour", UTCDateTime, primary_key=True),
    Column("tenant_id", Integer, primary_key=True),
    Column("task_id", Integer, primary_key=True),
    Column("fingerprint", String(32), primary_key=True),
    Column("error_code", String(80), nullable=False, default=""),
    Column("message", String(255), nullable=False, default=""),  # normalised (ids and numbers replaced)
    Column("letters", Integer, nullable=False, default=0),
)

report_error_days = Table(
    "report_error_days", db.metadata,
    Column("day", UTCDateTime, primary_key=True),
    Column("tenant_id", Integer, primary_key=True),
    Column("task_id", Integer, primary_key=True),
    Column("fingerprint", String(32), primary_key=True),
    Column("error_code", String(80), nullable=False, default=""),
    Column("message", String(255), nullable=False, default=""),  # normalised (ids and numbers replaced)
    Column("letters", Integer, nullable=False, default=0),
)


class ReportState(db.Model):
    """How far the rollups have been computed: hours before `through` (less a margin) are final."""

    __tablename__ = "report_state"
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    through = mapped_column(UTCDateTime, nullable=False)


class ForecastWarning(db.Model):
    """A conflict `task-dryrun` named before it happened: the earliest forecast of each (kind, task, minute)."""

    __tablename__ = "forecast_warnings"
    __table_args__ = (UniqueConstraint("kind", "tenant_id", "task_id", "at"),
                      Index("ix_forecast_warnings_at", "at"))
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # mutex | window | quota
    tenant_id: Mapped[int] = mapped_column(Integer)
    task_id: Mapped[int] = mapped_column(Integer)  # 0 for a tenant's quota
    at = mapped_column(UTCDateTime, nullable=False)  # the firing's nominal minute
    made_at = mapped_column(UTCDateTime, nullable=False)
