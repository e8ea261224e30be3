"""The figures managers read: one definition each, the seeds' targets, and the maths from rollup sums.

Pure: the rollup job counts (MEASURES, per task per hour), the report sums those counts over a period, and
`values` turns the sums into figures. The definitions here are the words the page's tooltips and the README use.
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from console.domain.histograms import ALERT_LATENCY, HISTOGRAMS, RECOVERY, TRIGGER_DELAY

# What the rollup counts per (hour, tenant, task, handler); histogram buckets follow.
COUNTS = (
    "starts",            # task runs whose first attempt started in the hour
    "on_time",           # ... within the task's max start delay of when they were due
    "finished",          # attempt series that ended: succeeded, or failed / dead-lettered by the engine
    "succeeded",
    "retried",           # first series that failed at least once and ended
    "retry_succeeded",   # ... and succeeded with no person acting
    "duplicates",        # handler successes beyond the first for one idempotency key
    "attempts_failed",   # attempts that failed (retried, failed or dead-lettered), for the Overview
    "dead",              # runs that became dead, for the Overview
    "dead_letters",      # dead letters created
    "recovered",         # dead letters whose run then succeeded (replayed)
    "alerts",            # first alerts of dead letters delivered
    "breaches",          # SLA breaches recorded
    "conflicts",         # firings the planner deferred or skipped for a mutex, window or quota
    "conflicts_named",   # ... that a task-dryrun forecast had named beforehand
)
MEASURES: tuple[str, ...] = COUNTS + tuple(column for histogram in HISTOGRAMS for column in histogram.columns)

# How late a task run may start when neither the task nor its policy says (the /metrics gauge uses the same).
DEFAULT_MAX_START_DELAY_S = 60


def _edges(seconds: tuple[float, ...]) -> str:
    """Say bucket edges as people read them, each unit once: "1, 5, 15, 30 min, 1, 2 h"."""
    spoken: list[tuple[int, str]] = []
    for edge in seconds:
        for size, unit in ((86_400, "days"), (3600, "h"), (60, "min"), (1, "s")):
            # A day is said as 24 h, so that 1 h .. 24 h read as one run of hours.
            if edge % size == 0 and (unit != "days" or edge > size):
                spoken.append((int(edge // size), unit))
                break
    return ", ".join(f"{number}" + (f" {unit}" if index + 1 == len(spoken) or spoken[index + 1][1] != unit else "")
                     for index, (number, unit) in enumerate(spoken))


# Why a time-to-recover percentile can exceed every recovery it counts: it is read from these buckets.
RECOVERY_BUCKETS = (f"Read from fixed buckets with edges at {_edges(RECOVERY.edges)}: exact to the bucket, "
                    "interpolated inside it, so it can be longer than any recovery counted (3 and 9 min lie in "
                    "1–5 min and 5–15 min: p90 reads 13 min); past the last edge it shows that edge.")


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    unit: str  # rate (0..1) | seconds | count
    definition: str
    target: float | None = None
    goal: str | None = None  # at_least | at_most | below: how the value is held against the target
    higher_is_better: bool | None = None  # for the trend arrow's colour when there is no target


FIGURES: tuple[Figure, ...] = (
    Figure("on_time_rate", "Scheduling on time", "rate",
           "Of the task runs whose first attempt started in the period, the share that started within the task's "
           "max start delay (its SLA, else its policy's, else 60 s) of when they were due. Due is the scheduled "
           "time; a run the planner deferred into its execution window is due when the window opens, so it is not "
           "late for waiting. Runs held for the tenant's quota count from their scheduled time. Runs still waiting "
           "past their limit now count as late; runs the planner skipped (mutex forbid) never start and are left out.",
           0.98, "at_least"),
    Figure("trigger_delay_p50_s", "Trigger delay p50", "seconds",
           "Median seconds from when a task run was due to when its first attempt started (due as for on-time). "
           "Read from fixed buckets: exact to the bucket, interpolated inside it, so with few runs it can read above "
           "the longest delay.",
           higher_is_better=False),
    Figure("trigger_delay_p95_s", "Trigger delay p95", "seconds",
           "95th percentile of seconds from when a task run was due to when its first attempt started. Read from fixed "
           "buckets: exact to the bucket, interpolated inside it, so with few runs it can read above the longest "
           "delay.",
           higher_is_better=False),
    Figure("trigger_delay_p99_s", "Trigger delay p99", "seconds",
           "99th percentile of seconds from when a task run was due to when its first attempt started. Read from "
           "fixed buckets: exact to the bucket (60 s is an edge), interpolated inside it.", 60, "at_most"),
    Figure("execution_success_rate", "Execution success", "rate",
           "Succeeded ÷ finished, over the attempt series that ended in the period: a success, or a failure the "
           "engine gave up on (non-retryable, or retries exhausted into the dead-letter queue). A replay is a new "
           "series. Cancelled runs are left out: a person's cancel, and the planner's own (mutex forbid, replace).",
           0.97, "at_least"),
    Figure("retry_success_rate", "Automatic retry success", "rate",
           "Of the runs whose first series failed at least once and ended in the period, the share that then "
           "succeeded with no person acting (no replay, no manual retry).", 0.90, "at_least"),
    Figure("duplicate_rate", "Duplicate execution", "rate",
           "Handler successes beyond the first for one idempotency key ÷ series finished. What the engine can see: "
           "a run (one per key) recorded as succeeded more than once, and an attempt whose handler succeeded after "
           "the engine had already given that attempt up (worker presumed lost) — its result was dropped, and a "
           "later success of the same run counts as a duplicate. Effects a handler repeats inside itself are not seen.",
           0.005, "below"),
    Figure("dead_letters_created", "Dead letters created", "count",
           "Runs parked in the dead-letter queue in the period (retries exhausted, or nothing left to try).",
           higher_is_better=False),
    Figure("dead_letters_recovered", "Dead letters recovered", "count",
           "Dead letters whose run succeeded in the period after being replayed (by hand, in bulk or by an "
           "approved fix). Discarded letters are not recovered.", higher_is_better=True),
    Figure("dead_letters_open", "Dead letters open", "count",
           "Dead letters waiting for a person now (not limited to the period).", higher_is_better=False),
    Figure("recovery_time_p50_s", "Time to recover p50", "seconds",
           "Median time from a dead letter's creation to its run's success, over the letters recovered in the period. "
           + RECOVERY_BUCKETS, higher_is_better=False),
    Figure("recovery_time_p90_s", "Time to recover p90", "seconds",
           "90th percentile of the time from a dead letter's creation to its run's success. " + RECOVERY_BUCKETS,
           higher_is_better=False),
    Figure("alert_latency_p50_s", "Alert latency p50", "seconds",
           "Median time from a dead letter to its group's alert reaching the first of its channels, over alerts "
           "a channel first took in the period, also those another channel then failed (repeats held back to "
           "gather a count are left out).", higher_is_better=False),
    Figure("alert_latency_p95_s", "Alert latency p95", "seconds",
           "95th percentile of the time from a dead letter to its group's alert reaching the first of its channels. "
           "Exact to the bucket (5 min is an edge; between edges, 1 and 2 min say, it is interpolated, so the exact "
           "figure of the last 24 h on Work orders may read a little differently).", 300, "at_most"),
    Figure("workorder_completion_rate", "Work orders completed", "rate",
           "Of the work orders opened in the period, the share closed now. A work order closes by itself only when "
           "each of its dead letters was discarded or resolved by a person, or replayed and its run ended well "
           "(succeeded, or compensated); a replayed run that dies again of the same error keeps it open (of another "
           "error, that error's work order takes it over). A person may also close it with a note.", 0.95, "at_least"),
    Figure("sla_breaches", "SLA breaches", "count",
           "Late starts and missed deadlines recorded in the period (the SLA check runs every minute).",
           higher_is_better=False),
    Figure("conflict_warning_hit_rate", "Conflict early warning", "rate",
           "Of the firings the planner deferred or skipped for a conflict in the period — a mutex (forbid skipped "
           "it, replace cancelled the run it displaced), an execution window (deferred), the tenant's queue quota "
           "(held) or its quota class's running slots (the claim deferred it; counted once per run) — the share "
           "that a `task-dryrun` forecast recorded before the firing had named: the same kind, the same task (the "
           "same tenant, for quota) and the same minute.", 0.90, "at_least"),
)
BY_NAME = {figure.name: figure for figure in FIGURES}
# The figures the JSON summary must carry (the names); the page shows every figure above.
HEADLINE = ("on_time_rate", "trigger_delay_p99_s", "execution_success_rate", "retry_success_rate", "duplicate_rate",
            "dead_letters_created", "dead_letters_recovered", "recovery_time_p50_s", "alert_latency_p95_s",
            "workorder_completion_rate", "sla_breaches", "conflict_warning_hit_rate")


@dataclass(frozen=True)
class Inputs:
    """A period's rollup sums plus what is read live (work orders, open letters, runs waiting late now)."""

    totals: Mapping[str, int]
    workorders_created: int = 0
    workorders_completed: int = 0
    dead_letters_open: int | None = None
    late_waiting: int = 0


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _totals(inputs: Inputs) -> dict[str, int]:
    """Return every rollup sum the figures read, 0 where the period has none."""
    return {name: int(inputs.totals.get(name) or 0) for name in MEASURES}


def values(inputs: Inputs) -> dict[str, float | int | None]:
    """Return every figure's value for one period (None where nothing was measured)."""
    t = _totals(inputs)
    return {
        "on_time_rate": _share(t["on_time"], t["starts"] + inputs.late_waiting),
        "trigger_delay_p50_s": TRIGGER_DELAY.percentile(t, 0.50),
        "trigger_delay_p95_s": TRIGGER_DELAY.percentile(t, 0.95),
        "trigger_delay_p99_s": TRIGGER_DELAY.percentile(t, 0.99),
        "execution_success_rate": _share(t["succeeded"], t["finished"]),
        "retry_success_rate": _share(t["retry_succeeded"], t["retried"]),
        "duplicate_rate": _share(t["duplicates"], t["finished"]),
        "dead_letters_created": t["dead_letters"],
        "dead_letters_recovered": t["recovered"],
        "dead_letters_open": inputs.dead_letters_open,
        "recovery_time_p50_s": RECOVERY.percentile(t, 0.50),
        "recovery_time_p90_s": RECOVERY.percentile(t, 0.90),
        "alert_latency_p50_s": ALERT_LATENCY.percentile(t, 0.50),
        "alert_latency_p95_s": ALERT_LATENCY.percentile(t, 0.95),
        "workorder_completion_rate": _share(inputs.workorders_completed, inputs.workorders_created),
        "sla_breaches": t["breaches"],
        "conflict_warning_hit_rate": _share(t["conflicts_named"], t["conflicts"]),
    }


def bases(inputs: Inputs) -> dict[str, tuple[int, int, str]]:
    """Return each rate's part and whole as counted, with what the whole counts ("1,203 of 1,227 starts")."""
    t = _totals(inputs)
    return {
        "on_time_rate": (t["on_time"], t["starts"] + inputs.late_waiting, "starts"),
        # In a manager's words: a run's series is its run, a replay counting again (the definitions say so).
        "execution_success_rate": (t["succeeded"], t["finished"], "finished runs"),
        # Not "runs that retried": a first attempt that failed for good is counted too, as the definition says (124).
        "retry_success_rate": (t["retry_succeeded"], t["retried"], "runs that failed at least once"),
        "duplicate_rate": (t["duplicates"], t["finished"], "finished runs"),
        "workorder_completion_rate": (inputs.workorders_completed, inputs.workorders_created, "work orders"),
        "conflict_warning_hit_rate": (t["conflicts_named"], t["conflicts"], "conflicts"),
    }


RATE_BASES = tuple(bases(Inputs(totals=Counter())))  # the rates bases() counts, in its order


def met(figure: Figure, value) -> bool | None:
    """Tell whether a value meets the figure's seed target (None without a target or a value)."""
    if figure.target is None or value is None:
        return None
    if figure.goal == "at_least":
        return value >= figure.target
    if figure.goal == "at_most":
        return value <= figure.target
    return value < figure.target


def better(figure: Figure) -> bool | None:
    """Tell whether a higher value is better (for the trend arrow's colour)."""
    if figure.goal is not None:
        return figure.goal == "at_least"
    return figure.higher_is_better


def trend(value, previous, figure: "Figure | None" = None) -> str | None:
    """Say which way a figure moved since the previous period: up, down or flat (also when the two read the same
    as the figure is written: "2.0 s, before 2.0 s ▲" says a change nobody can see)."""
    if value is None or previous is None:
        return None
    if abs(value - previous) <= 1e-9 * max(1.0, abs(previous)):
        return "flat"
    if figure is not None and shown(figure, value) == shown(figure, previous):
        return "flat"
    return "up" if value > previous else "down"


def duration(seconds: float | None) -> str:
    """Say a number of seconds the way a person would: 0.4 s, 45 s, 2 min 30 s, 3 h 5 min, 2 d 4 h."""
    if seconds is None:
        return "—"
    if seconds < 60:
        if seconds < 1:
            return f"{seconds:.2g} s"
        return f"{seconds:.1f} s" if seconds < 10 and seconds != int(seconds) else f"{seconds:.0f} s"
    whole = int(round(seconds))
    for size, name, smaller, smaller_name in ((86_400, "d", 3600, "h"), (3600, "h", 60, "min"), (60, "min", 1, "s")):
        if whole >= size:
            rest = (whole % size) // smaller
            return f"{whole // size} {name}" + (f" {rest} {smaller_name}" if rest else "")
    return f"{whole} s"


def shown(figure: Figure, value) -> str:
    """Write a figure's value for people: rates in per cent, seconds as a duration, counts whole."""
    if value is None:
        return "—"
    if figure.unit == "rate":
        digits = 2 if figure.target is not None and figure.target < 0.01 else 1
        # A value that misses its target never reads as the target itself: "97.0 % · target ≥ 97.0 % · missed"
        # (96.97 %) contradicted its verdict in front of a manager (helper 172); more digits until they differ.
        while (digits < 4 and value != figure.target and met(figure, value) is False
               and round(value, digits + 2) == round(figure.target, digits + 2)):
            digits += 1
        return f"{100 * value:.{digits}f} %"
    if figure.unit == "seconds":
        return duration(value)
    return f"{int(value):,}"


def target_text(figure: Figure) -> str:
    """Write the target the way the seeds do: ≥ 98 %, ≤ 60 s, < 0.50 %."""
    if figure.target is None:
        return "—"
    sign = {"at_least": "≥", "at_most": "≤", "below": "<"}[figure.goal]
    return f"{sign} {shown(figure, figure.target)}"
