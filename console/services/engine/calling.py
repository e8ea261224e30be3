"""Call handler code as the engine does: under its timeout, in a forked child when handlers are isolated."""

import contextlib
import functools
import signal
import threading
import time

from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty

from console.domain.errors import HandlerTimeout
from console.services.engine import isolation
from console.services.engine.context import HandlerContext
from console.services.settings import setting


def call_handler(fn, ctx: HandlerContext, timeout_s: int):
    """Call handler code; a hung one is stopped at timeout_s and counted as a timeout.

    A fork worker (ISOLATE_HANDLERS) calls it in a child process; otherwise it runs here under SIGALRM, as RQ does.
    """
    if setting("ISOLATE_HANDLERS"):
        return isolation.call_forked(fn, ctx, timeout_s)
    if threading.current_thread() is not threading.main_thread():
        return fn(ctx)  # signals only reach the main thread; RQ workers always call us there
    try:
        with _inner_alarm(int(timeout_s)):
            return fn(ctx)
    except JobTimeoutException as stopped:
        # Chained, so the run page's traceback shows the handler's own frames where it was stopped (the line that
        # hung), not only the engine's (helper 146).
        raise HandlerTimeout(message=f"handler ran past its {timeout_s} s timeout and was stopped") from stopped


@contextlib.contextmanager
def _inner_alarm(timeout_s: int):
    """Stop the handler at timeout_s with SIGALRM, then give back the alarm RQ's job timeout had set."""
    # There is one alarm per process: the handler's replaces RQ's (policy timeout + 60 s), whose penalty would
    # otherwise be switched off for the bookkeeping that follows. Put back its handler and what was left of it.
    outer_handler = signal.getsignal(signal.SIGALRM)
    outer_left = signal.alarm(0)
    started = time.monotonic()
    try:
        with UnixSignalDeathPenalty(timeout_s, JobTimeoutException):
            yield
    finally:
        signal.signal(signal.SIGALRM, outer_handler)
        if outer_left:
            signal.alarm(max(1, outer_left - int(time.monotonic() - started)))


def undo_call(invocation, timeout_s: int, *, asked: bool = False):
    """Return the handler's undo step, called like the handler itself (isolated, under the same timeout).

    After the run's own failure (not `asked`), a handler whose undo is only tried when asked for has none.
    """
    if invocation is None or invocation.compensate is None or (invocation.undo_only_when_asked and not asked):
        return None
    return functools.partial(call_handler, invocation.compensate, timeout_s=timeout_s)
