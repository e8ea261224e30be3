"""Call a handler in a forked child: its crash, leak or hang cannot take the worker, or its bookkeeping, down."""

import json
import logging
import os
import select
import signal
import sys
import threading
import time
import traceback

from console import metrics
from console.domain.errors import (
    CompensableError,
    HandlerError,
    HandlerTimeout,
    NonRetryableError,
    RetryableError,
)
from console.extensions import PINNED, db
from console.services.engine import diagnostics, heartbeat
from console.services.engine.results import json_safe

POLL_S = 0.2  # how soon a cancel request reaches the child
_held: list[logging.Handler] = []
_inherited: list = []  # in a child: what it must neither use nor close


def _quiesce() -> None:
    """Before any fork: let a heartbeat beat in flight finish, then every log line being written."""
    # A child inherits each lock exactly as it was: one held by another thread stays held there for good. A beat
    # runs inside SQLite (process-wide mutexes); a log line holds its stream's buffer lock, which CPython does not
    # re-create in a child (it does re-create the handlers' own locks). Beat first: a beat may log.
    heartbeat.BEATING.acquire()
    loggers = [logging.getLogger(), *(item for item in list(logging.Logger.manager.loggerDict.values())
                                      if isinstance(item, logging.Logger))]
    _held[:] = list(dict.fromkeys(handler for logger in loggers for handler in logger.handlers))
    for handler in _held:
        handler.acquire()


def _resume_in_parent() -> None:
    for handler in reversed(_held):
        handler.release()
    _held.clear()
    heartbeat.BEATING.release()


def _resume_in_child() -> None:
    # The handlers' locks were re-created by logging's own fork hook; the beat lock is ours to re-create.
    _held.clear()
    heartbeat.BEATING = threading.Lock()


# Every fork of a process that imported the engine: a handler's child here, RQ's scheduler process, granian's workers.
os.register_at_fork(before=_quiesce, after_in_parent=_resume_in_parent, after_in_child=_resume_in_child)


def call_forked(fn, ctx, timeout_s: float):
    """Return fn(ctx) run in a child process, or raise the handler's error as the parent's HandlerError.

    The child is killed at timeout_s (a HandlerTimeout); one that dies without answering is a retryable
    `handler_crashed`. A cancel request (ctx.cancel_event) is passed on with SIGUSR1.
    """
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child leaves by os._exit, which coverage cannot follow
        os.close(reader)
        _child(fn, ctx, writer)
    os.close(writer)
    try:
        payload = _read(reader, pid, ctx, timeout_s)
    finally:
        os.close(reader)
    _, status = os.waitpid(pid, 0)
    if not payload:
        raise RetryableError("handler_crashed", f"the handler's process died without an answer ({_death(status)})")
    answer = json.loads(payload)
    if answer.get("cancel_seen"):  # the handler looked in the child: its return is a stop (execute reads it)
        ctx.cancel_seen = True
    if "error" in answer:
        error = _rebuild(answer["error"])
        # The traceback and log lines are the child's: the parent's own would say only "raised here".
        setattr(error, diagnostics.TRACEBACK_ATTR, answer["error"].get("traceback"))
        setattr(error, diagnostics.LOG_ATTR, answer["error"].get("log_lines") or [])
        raise error
    return answer["result"]


def _read(reader: int, pid: int, ctx, timeout_s: float) -> bytes:
    """Read the child's answer until it closes the pipe; kill it at the deadline."""
    deadline = time.monotonic() + timeout_s
    chunks, cancel_sent = [], False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise HandlerTimeout(message=f"handler ran past its {timeout_s:g} s timeout and was stopped")
        ready, _, _ = select.select([reader], [], [], min(left, POLL_S))
        if ctx.cancel_event.is_set() and not cancel_sent:
            os.kill(pid, signal.SIGUSR1)
            cancel_sent = True
        if ready:
            chunk = os.read(reader, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _child(fn, ctx, writer: int) -> None:  # pragma: no cover - runs in the forked child
    """Run fn in the child, write its answer as JSON and leave without running the parent's exit handlers."""
    code = 0
    try:
        # The worker's own signal handlers (warm shutdown) and database connections belong to the parent.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGUSR1, lambda *_: ctx.cancel_event.set())
        # The parent's connections stay referenced, unused and unclosed until os._exit: closing one here would run
        # SQLite's close (a rollback, the WAL's bookkeeping) on a database the parent is still using. The child
        # opens its own connections, from a new pool, if the handler reports progress.
        _inherited.extend((db.session.info.pop(PINNED, None), db.engine.pool))
        db.engine.dispose(close=False)
        failure = None
        with diagnostics.Capture() as captured:
            try:
                answer = {"result": json_safe(fn(ctx))}
            except BaseException as error:  # noqa: BLE001 - every error is described to the parent, none lost
                answer, failure = {"error": _describe(error)}, error
        if failure is not None:
            answer["error"].update(traceback="".join(traceback.format_exception(failure)),
                                   log_lines=captured.lines)
        answer["cancel_seen"] = getattr(ctx, "cancel_seen", False)
        data = json.dumps(answer, default=str).encode()
        while data:
            data = data[os.write(writer, data):]
        metrics.flush()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - the parent reports a child that could not answer
        code = 70
    finally:
        os._exit(code)


def _describe(error: BaseException) -> dict:
    """Keep what classification needs of an error: its kind, code, message and hints."""
    if not isinstance(error, HandlerError):
        return {"kind": "unexpected", "code": type(error).__name__, "message": str(error)}
    kind = ("compensable" if isinstance(error, CompensableError) else
            "non_retryable" if isinstance(error, NonRetryableError) else
            "timeout" if isinstance(error, HandlerTimeout) else
            "retryable" if isinstance(error, RetryableError) else "handler_error")
    return {"kind": kind, "code": error.code, "message": error.message,
            "retry_after_s": getattr(error, "retry_after_s", None), "severity": getattr(error, "severity", None)}


def _rebuild(described: dict) -> HandlerError:
    """Make the parent's twin of a described error, which classify() reads exactly as it would the original."""
    kind, code, message = described["kind"], described["code"], described["message"]
    if kind == "compensable":
        return CompensableError(code, message, severity=described["severity"])
    if kind == "non_retryable":
        return NonRetryableError(code, message)
    if kind == "timeout":
        return HandlerTimeout(code, message, retry_after_s=described["retry_after_s"])
    if kind == "retryable":
        return RetryableError(code, message, retry_after_s=described["retry_after_s"])
    return HandlerError(code, message)  # unexpected errors: classify() retries them under their type's name


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"killed by signal {number} ({signal.Signals(number).name})"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
