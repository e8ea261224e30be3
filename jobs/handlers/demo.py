"""Demo handlers used by the demo data, the tests and the benchmarks."""

import logging
import time
from datetime import datetime

from console.domain.clock import utcnow
from console.domain.errors import CompensableError, NonRetryableError, RetryableError
from console.services.engine.registry import handler

log = logging.getLogger("jobs.handlers.demo")


@handler("demo.noop")
def noop(ctx):
    """Do nothing and succeed."""
    return {"ok": True}


def _undo(ctx):
    """Compensate demo.flaky: nothing to undo, but record that it ran (after `undo_seconds`, default 0).

    `undo_fail_times` fails the first tries of the undo itself (retryable), as a flaky downstream would;
    `undo_down_until` (an ISO 8601 time) fails every try before then, as a downstream that is down for a while.
    """
    time.sleep(float(ctx.params.get("undo_seconds", 0)))
    down_until = ctx.params.get("undo_down_until")
    if down_until and utcnow() < datetime.fromisoformat(down_until):
        raise RetryableError("undo_unavailable", f"the undo's service is down until {down_until[11:19]} UTC")
    fail_times = int(ctx.params.get("undo_fail_times", 0))
    if ctx.undo_attempt <= fail_times:
        raise RetryableError("undo_flaky", f"undo failure {ctx.undo_attempt} of {fail_times}")
    ctx.progress(100, "compensated")
    return {"compensated": True}


@handler("demo.flaky")
def flaky(ctx):
    """Fail the first `fail_times` executions of a run, then succeed.

    `error`: retryable (default) | fatal | compensable; `retry_after_s` adds a Retry-After hint;
    `code` names the error code; `log` is a line (or list of lines) logged as a warning before each failure.
    """
    fail_times = int(ctx.params.get("fail_times", 1))
    if ctx.execution <= fail_times:
        lines = ctx.params.get("log") or []
        for line in [lines] if isinstance(lines, str) else lines:
            log.warning("%s", line)
        kind = ctx.params.get("error", "retryable")
        message = ctx.params.get("message", f"flaky failure {ctx.execution} of {fail_times}")
        if kind == "fatal":
            raise NonRetryableError(ctx.params.get("code", "fatal"), message)
        if kind == "compensable":
            raise CompensableError(ctx.params.get("code", "compensable"), message,
                                   severity=int(ctx.params.get("severity", 1)))
        raise RetryableError(ctx.params.get("code", "flaky"), message,
                             retry_after_s=ctx.params.get("retry_after_s"))
    return {"succeeded_on_execution": ctx.execution}


# The same behaviour with an undo step, for the compensation path.
handler("demo.flaky_compensated", compensate=_undo)(flaky)
