"""RQ entry points for bulk operations on dead letters (they take ids and filter values, never objects)."""

from console.services.dlq import bulk as dlq_bulk
from console.services.dlq import paced_replay


def replay_matching(op_id: str, *, ids: list[int] | None = None, filters: dict | None = None,
                    tenant_id: int | None = None, rate: float = dlq_bulk.DEFAULT_RATE, actor: dict | None = None,
                    after_id: int = 0) -> str:
    """Replay the dead letters of bulk operation op_id (the listed ids, or all matching the filters)."""
    return paced_replay.run_replay(op_id, ids=ids, filters=filters, tenant_id=tenant_id, rate=rate, actor=actor,
                                   after_id=after_id)
