"""Whether a running run's worker still proves it is alive, in words for its page."""

from datetime import datetime

from console.domain.figures import duration
from console.models import Run
from console.services.settings import setting
from console.services.system.maintenance import MAINTENANCE

RECONCILE_S = next(job.seconds for job in MAINTENANCE if job.id == "reconcile")


def silence(run: Run, now: datetime) -> str | None:
    """Say that a running run's worker has been silent past the limit (its worker is taken for lost), else None.

    Its page read "running · heartbeat 33 s ago" for the minute the reconciler took, while Queues & workers already
    called its worker lost.
    """
    if run.status != "running" or run.heartbeat_at is None:
        return None
    silent, limit = (now - run.heartbeat_at).total_seconds(), setting("STALE_AFTER_S")
    if silent <= limit:
        return None
    return (f"no heartbeat for {duration(silent)}, over the {duration(limit)} a worker may stay silent: its worker is "
            f"taken for lost, and the reconciler's next pass (every {RECONCILE_S} s) retries this attempt as "
            "worker_lost")
