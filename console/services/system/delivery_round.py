"""The "outbox" maintenance job: settle work orders, then send what is due, so a closed order's resolve goes out now."""

from collections import Counter

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.services.delivery import dispatch
from console.services.workorders import changes as workorders


def tick(clock: Clock = SYSTEM_CLOCK) -> Counter:
    """Close the work orders whose dead letters are all settled, then deliver every due message."""
    workorders.close_settled(clock)
    return dispatch.deliver_due(clock)
