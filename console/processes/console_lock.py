"""One `rebound up` per data dir: a second one would share the first's SQLite file and stop its Redis on exit."""

import fcntl
import os
from pathlib import Path

from console import private


class AlreadyRunning(RuntimeError):
    """Another console holds the data dir; the message is its process id as it wrote it."""


def hold(data_dir: str) -> int:
    """Take the data dir's console lock for this process's life (the kernel frees it at exit, even a kill -9);
    return its descriptor, or raise AlreadyRunning."""
    path = Path(data_dir) / "up.lock"
    private.make_dir(path.parent)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, private.PRIVATE_FILE)  # not inherited by the children
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(descriptor, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(descriptor)
        raise AlreadyRunning(holder) from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, str(os.getpid()).encode("ascii"), 0)
    return descriptor
