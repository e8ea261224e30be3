"""What `rebound retry-inspect` prints: the delay queue and the dead-letter queue, counted."""

from sqlalchemy import func, select

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import DeadLetter, Run


def snapshot(clock: Clock = SYSTEM_CLOCK, oldest: int = 10) -> dict:
    """Count runs by status and handler, and list the oldest retry-waiting runs and open dead letters."""
    now = clock()
    by_status = dict(db.session.execute(select(Run.status, func.count()).group_by(Run.status)).all())
    waiting = db.session.execute(
        select(Run.handler, func.count(), func.min(Run.next_retry_at)).where(Run.status == "retry_wait")
        .group_by(Run.handler)).all()
    dead = db.session.execute(
        select(DeadLetter.handler, DeadLetter.error_code, func.count(), func.min(DeadLetter.created_at))
        .where(DeadLetter.status == "open").group_by(DeadLetter.handler, DeadLetter.error_code)).all()
    oldest_waiting = db.session.execute(select(Run).where(Run.status == "retry_wait")
                                        .order_by(Run.next_retry_at).limit(oldest)).scalars().all()
    oldest_dead = db.session.execute(select(DeadLetter).where(DeadLetter.status == "open")
                                     # by age: an imported letter failed long before its id was given
                                     .order_by(DeadLetter.created_at, DeadLetter.id).limit(oldest)).scalars().all()
    return {
        "at": now.isoformat(),
        "runs_by_status": by_status,
        "delay_queue": [{"handler": h, "count": c, "next_retry_at": n.isoformat() if n else None}
                        for h, c, n in waiting],
        "dead_letter_queue": [{"handler": h, "error_code": code, "count": c,
                               "oldest_age_s": int((now - first).total_seconds())} for h, code, c, first in dead],
        "oldest_retry_wait": [{"run_id": r.id, "handler": r.handler, "attempt": r.attempt,
                               "next_retry_at": r.next_retry_at.isoformat(), "error_code": r.error_code}
                              for r in oldest_waiting],
        "oldest_dead_letters": [{"id": d.id, "run_id": d.run_id, "handler": d.handler, "error_code": d.error_code,
                                 "age_s": int((now - d.created_at).total_seconds()), "reason": d.reason}
                                for d in oldest_dead],
    }
