"""What a run's status change asks for after its transaction commits: the advance of the run's workflow.

The engine knows a workflow only as `runs.workflow_id`. When such a run reaches a status its workflow acts on,
`transitions.move` notes the workflow here; once the transaction commits (write-ahead: the status is durable
first), an RQ job named by its entry point string, at the front of the runs' queue, advances it. A rollback drops the
note. A job lost on the way (Redis down, flushed) is found again by the workflows' reconcile pass.
"""

import logging

from rq import Queue
from sqlalchemy import event
from sqlalchemy.orm import Session

from console.domain.saga import STEP_DONE, UNDO_DONE
from console.redis_conn import get_redis
from console.services.engine import queueing

log = logging.getLogger("rebound.engine")
ADVANCE = "jobs.workflows.advance"
# Going forward a step's run ends succeeded, dead, compensated or cancelled; being undone, compensated or dead.
SIGNALS = STEP_DONE | UNDO_DONE
_NOTED = "rebound.workflows_to_advance"


def init_app(app) -> None:
    """Queue the noted advances when a transaction commits; forget them when it rolls back."""
    if not event.contains(Session, "after_commit", _after_commit):
        event.listen(Session, "after_commit", _after_commit)
        event.listen(Session, "after_rollback", _after_rollback)


def note(session, workflow_id: int) -> None:
    """Ask for the workflow's advance once the session's transaction commits."""
    session.info.setdefault(_NOTED, set()).add(workflow_id)


def _after_commit(session) -> None:
    for workflow_id in sorted(session.info.pop(_NOTED, ())):
        enqueue_advance(workflow_id)


def _after_rollback(session) -> None:
    session.info.pop(_NOTED, None)


def enqueue_advance(workflow_id: int) -> None:
    """Queue one advance of the workflow; if Redis is down, the reconcile pass advances it later."""
    # No fixed job id: an advance already running may have read the step before this change, so a second
    # one must still run. Advancing is idempotent; a spare job finds nothing to do.
    try:
        # At the front of the runs' queue, ahead of every queued run (the queues take turns): on the maintenance
        # queue, when workers read it last, a saga's next step and its undos waited behind every queued run (helper
        # 105).
        Queue(queueing.RUN_QUEUE, connection=get_redis()).enqueue(
            ADVANCE, workflow_id, result_ttl=60, failure_ttl=24 * 3600, at_front=True)
    except Exception as error:  # noqa: BLE001 - any transport failure is recovered by the reconcile pass
        log.warning("workflow %s: advance not queued (%s); the reconcile pass will advance it", workflow_id, error)
