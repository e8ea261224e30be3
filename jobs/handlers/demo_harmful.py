"""Demo handlers that hold or kill a worker: usable only in demo mode (REBOUND_DEMO), where nobody shares workers.

On a shared deployment any operator could otherwise take workers down with them.
"""

import os
import signal
import time

from console.services.engine.registry import handler


@handler("demo.sleep", demo_only=True)
def sleep(ctx):
    """Sleep `seconds`, reporting progress and stopping early when cancelled."""
    seconds = float(ctx.params.get("seconds", 1))
    steps = max(1, int(seconds * 10))
    for step in range(steps):
        if ctx.cancelled():
            return {"slept_s": step / 10, "cancelled": True}
        time.sleep(seconds / steps)
        ctx.progress(100 * (step + 1) // steps, f"slept {(step + 1) * seconds / steps:.1f} of {seconds:g} s")
    return {"slept_s": seconds}


@handler("demo.crash", demo_only=True)
def crash(ctx):
    """Kill the process running it, as a crashing native library would; a fork worker survives it."""
    os.kill(os.getpid(), signal.SIGKILL)
