"""Fixed-bucket histograms: counts per bucket add up across hours, tasks and tenants, so percentiles merge.

A percentile read from buckets is only known to lie inside its bucket. `percentile` interpolates linearly
inside that bucket (as Prometheus' histogram_quantile does), so the error is at most the bucket's width; in
the last, open bucket it answers the bucket's lower edge ("at least this"). Each seed target is a bucket
edge, so whether a target is met does not depend on the interpolation.
"""

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Histogram:
    """Buckets with upper edges in seconds; one more bucket holds everything above the last edge."""

    name: str
    edges: tuple[float, ...]

    @property
    def columns(self) -> list[str]:
        return [f"{self.name}_{index}" for index in range(len(self.edges) + 1)]

    def column(self, value: float) -> str:
        """Name the bucket a value falls in: the first whose upper edge is at least the value."""
        return f"{self.name}_{bisect_left(self.edges, value)}"

    def counts(self, totals: Mapping[str, int]) -> list[int]:
        return [int(totals.get(column) or 0) for column in self.columns]

    def percentile(self, totals: Mapping[str, int], share: float) -> float | None:
        return percentile(self.counts(totals), self.edges, share)


def percentile(counts: Sequence[int], edges: Sequence[float], share: float) -> float | None:
    """Return the `share` percentile (0..1) of bucketed values, interpolated inside its bucket; None if empty."""
    total = sum(counts)
    if not total:
        return None
    rank = share * total
    seen = 0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            lower = edges[index - 1] if index else 0.0
            if index == len(edges):
                return float(lower)  # above the last edge: we only know it is at least that
            return lower + (edges[index] - lower) * max(0.0, rank - seen) / count
        seen += count
    return float(edges[-1])


# Trigger delay: seconds from when a run was due to when it started. The seed target (under 1 min) is an edge.
TRIGGER_DELAY = Histogram("delay", (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 300, 900, 3600))
# Time to recover: dead letter created -> its run succeeded (after a replay).
RECOVERY = Histogram("recovery", (60, 300, 900, 1800, 3600, 7200, 14_400, 28_800, 57_600, 86_400, 172_800,
                                  345_600, 604_800, 1_209_600, 2_592_000))
# Alert latency: dead letter -> its alert delivered. The seed target (5 min) is an edge.
ALERT_LATENCY = Histogram("alert", (1, 2, 5, 10, 15, 30, 60, 120, 180, 300, 600, 900, 1800, 3600))
HISTOGRAMS = (TRIGGER_DELAY, RECOVERY, ALERT_LATENCY)
