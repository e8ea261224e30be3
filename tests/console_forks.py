"""Start `python -m console.cli ...` as a fork of a process that has already imported the console.

A real start spent ~1.35 CPU-s importing (the console, Flask, SQLAlchemy, RQ, granian) before it did anything, and
the fixtures start a `rebound web` or `worker` ~120 times a pass on two cores. Each test process gets one launcher
(`python -m tests.console_forks`), which imports all of that once and then forks a child per start: the child takes
the start's argv, environment, working directory, stdio and session, and runs `console.cli` as `python -m` would.
The test holds a `ForkedProcess`, which answers as `subprocess.Popen` does (pid, poll, wait, signals); its exit
status comes from the launcher, whose child it is. A start that changes how the interpreter itself starts (any
PYTHON* variable but PYTHONPATH) is a real one, and the CLI's own tests keep real starts throughout.
"""

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# One request or answer: a length-prefixed JSON object, with at most three file descriptors (stdin, stdout, stderr).
_HEADER = 4
_MAX_FDS = 3


def _send(channel: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    payload = len(data).to_bytes(_HEADER, "big") + data
    sent = socket.send_fds(channel, [payload], list(fds)) if fds else 0
    channel.sendall(payload[sent:])  # sendmsg may take only part of a stream's bytes


def _receive(channel: socket.socket) -> tuple[dict, list[int]] | None:
    """Read one message and the descriptors sent with it; None at end of file. Only one message is ever in flight
    (each request waits for its answer), so a read never takes the start of the next."""
    data, fds, _flags, _address = socket.recv_fds(channel, 1 << 20, _MAX_FDS)
    while data and (len(data) < _HEADER or len(data) < _HEADER + int.from_bytes(data[:_HEADER], "big")):
        more = channel.recv(1 << 20)
        if not more:
            return None
        data += more
    return (json.loads(data[_HEADER:]), fds) if data else None


class ForkedProcess:
    """A started command, answered as subprocess.Popen answers (pid, returncode, poll, wait, signals)."""

    def __init__(self, launcher: "Launcher", pid: int, args: list[str]):
        self._launcher, self.pid, self.args, self.returncode = launcher, pid, args, None

    def poll(self) -> int | None:
        return self.wait(0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the exit status as Popen does; a timeout of 0 answers None while it runs (poll)."""
        if self.returncode is None:
            answer = self._launcher.ask({"wait": self.pid, "timeout": timeout})
            if answer["returncode"] is None:
                if timeout == 0:
                    return None
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = answer["returncode"]
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:  # as Popen: a reaped pid may be another process's by now
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Launcher:
    """This test process's launcher: started on first use, gone when this process's end of its socket closes."""

    def __init__(self, log_path: Path):
        ours, theirs = socket.socketpair()
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "tests.console_forks", str(theirs.fileno())],
                                            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=log)
        theirs.close()
        self.channel, self.lock, self.log_path = ours, threading.Lock(), log_path
        self.settings = _interpreter_settings(os.environ)  # the launcher's, which every fork of it keeps
        answer = self.ask({"hello": True})
        if not answer.get("ready"):
            raise RuntimeError(f"the console launcher did not start: {answer}; see {log_path}")

    def ask(self, message: dict, fds: list[int] = ()) -> dict:
        with self.lock:
            _send(self.channel, message, fds)
            received = _receive(self.channel)
        if received is None:
            raise RuntimeError(f"the console launcher (pid {self.process.pid}) is gone; see {self.log_path}")
        return received[0]

    def start(self, module: str, args: list[str], env: dict, cwd: str, stdio: list[int],
              new_session: bool) -> ForkedProcess:
        answer = self.ask({"module": module, "args": args, "env": env, "cwd": cwd, "new_session": new_session},
                          stdio)
        return ForkedProcess(self, answer["pid"], [sys.executable, "-m", module, *args])

    def close(self) -> None:
        self.channel.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        if self.log_path.stat().st_size == 0:
            self.log_path.unlink()


_launcher: Launcher | None = None


def _interpreter_settings(env) -> dict:
    return {key: value for key, value in env.items() if key.startswith("PYTHON") and key != "PYTHONPATH"}


def _fd(stream, default: int, null) -> int:
    """The descriptor Popen would give the child for `stream`."""
    if stream is None:
        return default
    if stream == subprocess.DEVNULL:
        return null.fileno()
    if isinstance(stream, int) and stream < 0:
        raise ValueError("a forked start takes files or descriptors, not pipes: write to a file and read it")
    return stream if isinstance(stream, int) else stream.fileno()


def start(args: list[str], env: dict, stdout=None, stderr=None, start_new_session: bool = False, cwd=None,
          module: str = "console.cli"):
    """Start `python -m console.cli *args` as Popen would (stdout/stderr: files, descriptors, or STDOUT for stderr);
    forked from this process's launcher, or a real start where the environment changes how Python starts."""
    global _launcher
    if _launcher is None:
        _launcher = Launcher(Path(tempfile.gettempdir()) / f"console-launcher-{os.getpid()}.log")
        atexit.register(_launcher.close)
    if _interpreter_settings(env) != _launcher.settings:
        return subprocess.Popen([sys.executable, "-m", module, *args], env=env, stdout=stdout, stderr=stderr,
                                start_new_session=start_new_session, cwd=cwd)
    with open(os.devnull, "r+b") as null:
        out = _fd(stdout, 1, null)
        err = out if stderr == subprocess.STDOUT else _fd(stderr, 2, null)
        return _launcher.start(module, list(args), dict(env), str(cwd or os.getcwd()), [null.fileno(), out, err],
                               start_new_session)


# ---- the launcher's side ---------------------------------------------------------------------------------------


def _preload() -> None:
    """Import what a `rebound web` or `worker` imports, so each fork starts with it."""
    import importlib
    import pkgutil

    import console.cli  # noqa: F401
    import jobs

    for package in (sys.modules["console"], jobs):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)


def _exit_status(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _wait(pid: int, timeout: float | None) -> int | None:
    """Reap the child if it has ended within `timeout` (None: however long it takes); its Popen-style status."""
    done, status = os.waitpid(pid, os.WNOHANG)
    if not done and timeout != 0:
        ended = os.pidfd_open(pid)  # readable once the child has ended
        try:
            select.select([ended], [], [], timeout)
        finally:
            os.close(ended)
        done, status = os.waitpid(pid, os.WNOHANG)
    return _exit_status(status) if done else None


def _serve(channel: socket.socket) -> tuple[dict, list[int]] | None:
    """Answer requests until the test process goes; in a forked child, return the start it is to run."""
    while (received := _receive(channel)) is not None:
        message, fds = received
        if "hello" in message:
            _send(channel, {"ready": threading.active_count() == 1})
        elif "wait" in message:
            _send(channel, {"returncode": _wait(message["wait"], message["timeout"])})
        elif "module" in message:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                return message, fds
            for fd in fds:
                os.close(fd)
            _send(channel, {"pid": pid})
    return None


def _become(message: dict, fds: list[int]) -> None:
    """In the forked child: take the start's stdio, session, environment, directory and argv."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if message["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.environ.clear()
    os.environ.update(message["env"])
    os.chdir(message["cwd"])
    sys.path[0] = message["cwd"]  # as `python -m` puts it
    extra = [entry for entry in message["env"].get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[1:1] = [entry for entry in extra if entry not in sys.path]
    import importlib

    importlib.invalidate_caches()
    sys.argv = ["-m", *message["args"]]


def main() -> None:
    channel = socket.socket(fileno=int(sys.argv[1]))
    # In the tests' process group, as Popen's children were, so a Ctrl-C on `make test` stops every start; the
    # launcher itself lives on to answer the fixtures' teardowns (each start gets Python's handler back).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _preload()
    start_request = _serve(channel)
    if start_request is None:
        return
    channel.close()
    _become(*start_request)
    import runpy

    module = start_request[0]["module"]
    sys.modules.pop(module, None)  # run afresh as __main__, as `python -m` runs it (imported only to be preloaded)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
