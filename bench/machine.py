"""How steady this machine's CPUs are: the same small piece of Python work timed over and over on every core.

    .venv/bin/python -m bench.machine [--seconds 5]

A latency percentile measured here is only as good as the machine under it. On a shared virtual machine the
host can slow a guest's cores for milliseconds at a time (the guest still counts the time as its own), and
at a p99 over a few seconds one such episode decides the figure. This prints how often a fixed unit of work
took more than four times its usual CPU time, and what share of all the CPU time those slow units took.
"""

import argparse
import multiprocessing
import os
import statistics
import time
from pathlib import Path

SLOW = 4  # a unit this many times its median counts as slowed by something outside the process


def _unit() -> int:
    total = 0
    for i in range(2000):
        total += i * i
    return total


def _time_units(seconds: float) -> list[float]:
    """Return the CPU time, in seconds, of each fixed unit of work run back to back for `seconds`."""
    # CPU time, not wall time: a unit the guest's scheduler set aside for another process is not counted as slow.
    for _ in range(200):  # warm up
        _unit()
    durations = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.thread_time()
        for _ in range(4):
            _unit()
        durations.append(time.thread_time() - start)
    return durations


def busy_cpu_seconds() -> float:
    """Return the CPU seconds every process on the machine has spent since boot (/proc/stat: all but idle and
    waiting), to divide what a benchmark spent, servers and clients together, by the work it did."""
    user, nice, system, _idle, _iowait, irq, softirq = map(int, Path("/proc/stat").read_text().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


# A process's role, by a word of its command line, for splitting a benchmark's CPU by process (first match wins).
ROLES = (("postgres", "PostgreSQL"), ("redis-server", "Redis"), ("rebound web", "web"), ("worker", "workers"))


def process_cpu() -> dict[int, tuple[str, float]]:
    """Return each running process's role and the CPU seconds it has spent (/proc/<pid>/stat: user + system)."""
    tick, found = os.sysconf("SC_CLK_TCK"), {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # it ended meanwhile
        role = "this process" if int(pid) == os.getpid() else next(
            (name for word, name in ROLES if word in command), "other")
        found[int(pid)] = (role, (int(fields[11]) + int(fields[12])) / tick)
    return found


def cpu_by_role(before: dict, after: dict, per: int) -> dict[str, float]:
    """Return the ms of CPU each role spent per unit of work between two process_cpu() readings.

    A process that ended in between is not counted: read both while the benchmark's servers and workers run.
    """
    spent: dict[str, float] = {}
    for pid, (role, seconds) in after.items():
        spent[role] = spent.get(role, 0.0) + seconds - before.get(pid, (role, 0.0))[1]
    return {role: 1000 * seconds / per for role, seconds in sorted(spent.items())}


def describe_roles(figures: list[dict[str, float]]) -> str:
    """Format the median ms per unit of each role over some rounds, largest first (roles under 0.01 ms left out)."""
    roles = {role for figure in figures for role in figure}
    medians = {role: statistics.median(figure.get(role, 0.0) for figure in figures) for role in roles}
    return ", ".join(f"{role} {ms:.2f}" for role, ms in sorted(medians.items(), key=lambda item: -item[1])
                     if ms >= 0.01)


def steadiness(seconds: float = 5.0, cores: int | None = None) -> dict:
    """Run the fixed work on every core at once; return its median, p99.9 and how much time slowed units took."""
    cores = cores or os.cpu_count() or 1
    with multiprocessing.get_context("fork").Pool(cores) as pool:
        per_core = pool.map(_time_units, [seconds] * cores)
    durations = sorted(d for core in per_core for d in core)
    median = statistics.median(durations)
    slowed = [d for d in durations if d > SLOW * median]
    return {"cores": cores, "median_ms": median * 1000, "p999_ms": durations[int(0.999 * (len(durations) - 1))] * 1000,
            "max_ms": durations[-1] * 1000, "slowed_units": len(slowed), "slowed_share": sum(slowed) / sum(durations)}


def describe(result: dict) -> str:
    """One line for a benchmark's output."""
    return (f"machine steadiness, fixed work on all {result['cores']} cores: unit median {result['median_ms']:.2f} ms, "
            f"p99.9 {result['p999_ms']:.2f} ms, max {result['max_ms']:.1f} ms; {result['slowed_units']} units over "
            f"{SLOW}× the median took {100 * result['slowed_share']:.1f} % of the CPU time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    print(describe(steadiness(parser.parse_args().seconds)))


if __name__ == "__main__":
    main()
