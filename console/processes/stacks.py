"""Where a stuck process is: every thread's stack, written to its log on SIGUSR2, before it is killed."""

import contextlib
import faulthandler
import os
import signal
import time
from pathlib import Path

DUMP_SIGNAL = signal.SIGUSR2
_PROC = Path("/proc")


def dump_on_signal() -> None:
    """Have this process (and what it forks: RQ's scheduler, fork-kind children) print its stacks on SIGUSR2."""
    # faulthandler's C handler writes without the GIL, so a process stuck holding it still answers.
    faulthandler.register(DUMP_SIGNAL, all_threads=True)


def _catches_dump_signal(pid: int) -> bool:
    """True if the process installed a handler for SIGUSR2 (its default action would kill it)."""
    try:
        status = (_PROC / str(pid) / "status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) >> (DUMP_SIGNAL - 1) & 1)


def _descendants(pid: int) -> list[int]:
    """The process and every process below it, read from /proc (empty where there is no /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in _PROC.glob("[0-9]*"):
        try:
            # The command name, in brackets, may hold spaces: the parent pid is the second field after it.
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, []))
    return found


def dump(pid: int, settle_s: float = 0.5) -> list[int]:
    """Ask a process and its descendants that listen for it to print their stacks; return the pids asked."""
    asked = [each for each in _descendants(pid) if _catches_dump_signal(each)]
    for each in asked:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(each, DUMP_SIGNAL)
    if asked:
        time.sleep(settle_s)  # the dumps are written by the processes themselves
    return asked
