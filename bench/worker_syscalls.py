"""System calls per attempt of Rebound's workers, one worker against two: what a second writer costs SQLite.

    .venv/bin/python -m bench.worker_syscalls [--runs 2000] [--workers 1,2]

SQLite in a temp dir and an embedded Redis. Runs are submitted first; then `rebound worker --burst` processes
drain them under `strace -f -c` (Debian's strace), and the calls of every worker are added up and divided by the
runs (start-up included: a few calls a run at 2,000 runs, more at fewer). Unlike throughput or CPU time, these
counts do not move with the machine's load, so two runs of the same code agree. With one worker SQLite keeps its
page cache between transactions; with two, each finds the other's commit and reads its pages again (`pread64`).
"""

import argparse
import os
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from bench.engine import ROOT, Bench

SHOWN = 12


class TracedBench(Bench):
    """A Bench whose worker processes run under `strace -f -c`, each writing its summary into `reports`."""

    reports: Path

    def workers(self, argv: list[str], count: int) -> list[subprocess.Popen]:
        return [subprocess.Popen(["strace", "-f", "-c", "-o", str(self.reports / f"strace.{i}"), *argv],
                                 env=self.env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for i in range(count)]


def counts(bench: TracedBench, runs: int, workers: int) -> Counter:
    """Drain `runs` no-op runs with `workers` traced worker processes; return each system call's count."""
    bench.rebound(runs, workers, "simple")
    total: Counter = Counter()
    for report in bench.reports.glob("strace.*"):
        for line in report.read_text().splitlines():
            # "% time  seconds  usecs/call  calls  [errors]  syscall": the calls column is the fourth.
            fields = line.split()
            if len(fields) >= 5 and fields[3].isdigit() and fields[-1].isidentifier() and fields[-1] != "total":
                total[fields[-1]] += int(fields[3])
        report.unlink()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--workers", default="1,2", help="worker process counts to compare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench = TracedBench(Path(tmp))
        bench.reports = Path(tmp)
        try:
            print(f"{args.runs} no-op runs, system calls per run of all workers (strace -f -c); "
                  f"load average {os.getloadavg()[0]:.1f}")
            for workers in (int(w) for w in args.workers.split(",")):
                calls = counts(bench, args.runs, workers)
                top = ", ".join(f"{name} {count / args.runs:.1f}" for name, count in calls.most_common(SHOWN))
                print(f"{workers} worker(s): {sum(calls.values()) / args.runs:.1f} in all; {top}", flush=True)
        finally:
            bench.close()


if __name__ == "__main__":
    main()
