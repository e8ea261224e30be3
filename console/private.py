"""Files and directories private to the account that runs the console: the data dir, the SQLite file."""

import os
import stat
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def make_dir(path: str | Path) -> Path:
    """Create a directory readable by its owner only; one that exists is left as its owner set it."""
    path = Path(path)
    if path.is_dir():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=PRIVATE_DIR)
    except FileExistsError:
        return path  # another process made it first, with the same mode
    path.chmod(PRIVATE_DIR)  # mkdir's mode passes through the umask, which may be odd
    return path


def create_file(path: str | Path) -> bool:
    """Create an empty file readable by its owner only, unless it exists; tell whether it was created."""
    path = Path(path)
    make_dir(path.parent)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return False
    os.close(descriptor)
    os.chmod(path, PRIVATE_FILE)
    return True


def exposed(*paths: str | Path) -> list[str]:
    """Describe each existing path that other accounts may read or enter, with the command that closes it."""
    found = []
    for path in map(Path, paths):
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            continue
        if mode & 0o077:
            private = PRIVATE_DIR if path.is_dir() else PRIVATE_FILE
            found.append(f"{path} is mode {mode:o}: other accounts on this machine can read it; "
                         f"'chmod {private:o} {path}' if nobody else needs to")
    return found
