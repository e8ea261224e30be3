"""Run several child processes, restart the ones that die, stop them all on Ctrl-C."""

import faulthandler
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from console.logs import PROCESS_NAME_ENV
from console.parent_death import exec_dies_with_this_process
from console.processes import stacks

log = logging.getLogger("rebound.up")


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    restarts: int = 0
    started_at: float = 0.0
    next_start: float = 0.0
    env: dict = field(default_factory=dict)
    # A burst worker: exiting 0 is its work done, not a crash to restart (`worker --burst --processes 2` restarted
    # its drained children for ever; helper 121).
    one_shot: bool = False
    finished: bool = False

    def start(self) -> None:
        # A supervisor killed -9 (the OOM killer, an operator) takes its children with it: left running, they
        # went on beside whatever the next `rebound up` started.
        # Each child's log lines carry its name (web, worker-1, scheduler), not MainProcess.
        env = {**(self.env or os.environ), PROCESS_NAME_ENV: self.name}
        self.process = subprocess.Popen(self.argv, env=env, preexec_fn=exec_dies_with_this_process())
        self.started_at = time.monotonic()
        log.info("started %s (pid %s)", self.name, self.process.pid)


class Supervisor:
    """Keep every child running until asked to stop."""

    def __init__(self, children: list[Child], poll_s: float = 0.5, tend: Callable[[], None] | None = None,
                 stop_timeout_s: float = 15.0):
        self.children = children
        self.stop_timeout_s = stop_timeout_s
        self.poll_s = poll_s
        self.tend = tend  # called every poll: keeps up what the children need (the embedded Redis)
        self.stopping = False
        self.forced = False

    def _request_stop(self, signum, frame) -> None:
        self.stopping = True

    def _force(self, signum, frame) -> None:
        self.forced = True

    def _dump_everyone(self, signum, frame) -> None:
        """Write this process's stacks, and ask each child (and what it forked) for theirs."""
        faulthandler.dump_traceback(all_threads=True)
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                stacks.dump(child.process.pid, settle_s=0)

    def run(self) -> None:
        """Start the children and watch them; return once all have stopped."""
        signal.signal(signal.SIGINT, self._request_stop)
        signal.signal(signal.SIGTERM, self._request_stop)
        # `kill -USR2` on the one pid a person has (rebound up's) ended the whole console: SIGUSR2's default action
        # killed it, and its children followed. Here it writes every process's stacks, as on the others.
        signal.signal(stacks.DUMP_SIGNAL, self._dump_everyone)
        for child in self.children:
            child.start()
        while not self.stopping and not all(child.finished for child in self.children):
            time.sleep(self.poll_s)
            if self.stopping:
                break  # children that Ctrl-C reached directly are not dying: they are not to be restarted
            if self.tend is not None:
                self.tend()
            for child in self.children:
                self._watch(child)
        self.stop()

    def _watch(self, child: Child) -> None:
        now = time.monotonic()
        if child.finished:
            return
        if child.process is None:
            if now >= child.next_start:
                child.start()
            return
        code = child.process.poll()
        if code is None:
            return
        if code == 0 and child.one_shot:
            log.info("%s finished its work", child.name)
            child.process, child.finished = None, True
            return
        # Back off if it keeps dying young, so a broken child does not spin the CPU.
        quick = now - child.started_at < 10
        child.restarts += 1
        delay = min(30.0, 2.0 ** min(child.restarts, 5)) if quick else 1.0
        log.warning("%s exited with code %s; restarting in %.0f s (restart #%d)", child.name, code, delay,
                    child.restarts)
        child.process = None
        child.next_start = now + delay

    def stop(self) -> None:
        """Ask every child to stop; kill whatever still runs after the timeout, or at once on a second signal."""
        timeout_s = self.stop_timeout_s
        live = [c for c in self.children if c.process and c.process.poll() is None]
        for child in live:
            child.process.send_signal(signal.SIGTERM)
        self.forced = False
        signal.signal(signal.SIGINT, self._force)
        signal.signal(signal.SIGTERM, self._force)
        if live:
            log.info("stopping %s; running jobs get up to %.0f s to finish (Ctrl-C again stops them now)",
                     ", ".join(c.name for c in live), timeout_s)
        deadline = time.monotonic() + timeout_s
        while (not self.forced and time.monotonic() < deadline
               and any(c.process.poll() is None for c in live)):
            time.sleep(0.05)
        for child in live:
            if child.process.poll() is None:
                if self.forced:
                    log.warning("%s did not stop before the second Ctrl-C; killing it", child.name)
                else:
                    # Where it hangs is worth a line in the log: a stop that never comes is otherwise a mystery.
                    dumped = stacks.dump(child.process.pid)
                    log.warning("%s did not stop within %.0f s; killing it%s", child.name, timeout_s,
                                f" (the stacks of pids {', '.join(map(str, dumped))} are above)" if dumped else "")
                child.process.kill()
                child.process.wait()
        log.info("all processes stopped")
