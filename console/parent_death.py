"""Children a process forks end with it: a killed worker leaves no RQ scheduler or handler child running."""

import ctypes
import ctypes.util
import os
import signal

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _prctl():
    """Return libc's prctl, or None where there is none (not Linux)."""
    path = ctypes.util.find_library("c")
    libc = ctypes.CDLL(path, use_errno=True) if path else None
    return getattr(libc, "prctl", None)


def forked_children_die_with_this_process() -> bool:
    """Have every child this process forks from now on get SIGTERM when this process dies; False if unsupported."""
    # RQ's scheduler is a forked child of the worker and does not watch its parent: after a worker was killed -9
    # it kept the scheduler locks and moved due jobs on its own until the console stopped. A handler running in a
    # fork-kind child went on running beside the retry the reconciler started for the abandoned attempt.
    prctl = _prctl()
    if prctl is None:
        return False
    forking = {}

    def before():
        forking["pid"] = os.getpid()  # the forking process, also when a child forks in turn

    def in_child():
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != forking["pid"]:  # the parent died between the fork and the line above
            os.kill(os.getpid(), signal.SIGTERM)

    os.register_at_fork(before=before, after_in_child=in_child)
    return True
