"""Children end with the process that started them: a killed worker or console leaves nothing running."""

import ctypes
import functools
import os
import signal

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


@functools.cache
def _prctl():
    """Return libc's prctl, or None where there is none (not Linux)."""
    return getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)


def die_with(parent: int) -> None:
    """In a child just forked by `parent`: have the kernel send it SIGTERM when `parent` dies (Linux only)."""
    prctl = _prctl()
    if prctl is None:
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died between the fork and the line above
        os.kill(os.getpid(), signal.SIGTERM)


def exec_dies_with_this_process():
    """Return a `preexec_fn` for subprocess: the program it starts gets SIGTERM when this process dies."""
    # subprocess runs the at-fork hooks below only when given a preexec_fn (else it may vfork); the signal, set
    # before the exec, survives it.
    _prctl()  # looked up here: loading libc in the child of a threaded process could deadlock
    return functools.partial(die_with, os.getpid())


def forked_children_die_with_this_process() -> None:
    """Have every child this process forks from now on get SIGTERM when this process dies."""
    # RQ's scheduler is a forked child of the worker and does not watch its parent: after a worker was killed -9
    # it kept the scheduler locks and moved due jobs on its own until the console stopped. A handler running in a
    # fork-kind child went on running beside the retry the reconciler started for the abandoned attempt.
    _prctl()  # looked up before any fork, not in each child
    forking = {}
    os.register_at_fork(before=lambda: forking.update(pid=os.getpid()),  # also when a child forks in turn
                        after_in_child=lambda: die_with(forking["pid"]))
