"""Capacity reservations as rules: the peak reserved over a range, and what a claim may take now."""

from dataclasses import dataclass
from datetime import datetime

from console.domain.words import agree


def peak(spans: list[tuple[datetime, datetime, int]], start: datetime, end: datetime) -> int:
    """Return the most running slots reserved at any one moment of [start, end) by these (start, end, slots) spans."""
    points = []
    for s, e, slots in spans:
        s, e = max(s, start), min(e, end)
        if s < e:
            points += [(s, slots), (e, -slots)]
    # Ends sort before starts at the same moment: a range ending at 10:00 and one starting then do not overlap.
    points.sort(key=lambda point: (point[0], point[1]))
    level = highest = 0
    for _, change in points:
        level += change
        highest = max(highest, level)
    return highest


@dataclass(frozen=True)
class Hold:
    """Why a claim waits for reserved capacity: the free slots and the tenants holding unused reserved ones."""

    capacity: int
    running: int
    unused: dict[str, int]

    def explain(self) -> str:
        # Other tenants are not named: the reason is shown to people who see only this run's tenant.
        unused = sum(self.unused.values())
        return (f"reserved capacity: {self.running} of the {self.capacity} promised running slots are in use and "
                f"{unused} more {agree(unused, 'is', 'are')} reserved by other tenants for now and unused; it starts "
                "when a slot frees")


def held_back(tenant: str, reserved: dict[str, int], running: dict[str, int], total_running: int,
              capacity: int) -> Hold | None:
    """Tell whether a run of `tenant` must wait so as not to take another tenant's unused reserved slot.

    A tenant running fewer than its own reservation always uses one of its own slots. Otherwise the run takes
    an unreserved slot, and there is one only if the runs everywhere plus the slots others reserved and do not
    use stay below the capacity.
    """
    if running.get(tenant, 0) < reserved.get(tenant, 0):
        return None
    unused = {name: slots - running.get(name, 0) for name, slots in reserved.items()
              if name != tenant and slots > running.get(name, 0)}
    if total_running + sum(unused.values()) < capacity:
        return None
    return Hold(capacity, total_running, unused)
