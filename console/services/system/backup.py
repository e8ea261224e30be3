"""Back up a running deployment: its SQLite database, copied online, with the data dir's files that go with it."""

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from console.db.sqlite import database_file
from console.services.errors import InvalidInput

DATABASE = "rebound.db"
SECRET_KEY = "secret_key"


@dataclass(frozen=True)
class Backup:
    """What a backup wrote."""

    directory: Path
    files: list[str]
    database_bytes: int


def backup(destination: Path, database_url: str, data_dir: Path, anchor_file: Path) -> Backup:
    """Copy the database with SQLite's online backup (consistent, its WAL included, while everything runs), after
    the audit anchor file (so no anchor names a row the copy lacks) and the generated secret key."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        raise InvalidInput(f"the database is {url.get_backend_name()}: back it up with its own tools (pg_dump), "
                           f"and keep {data_dir / SECRET_KEY} and {anchor_file} with it", "database")
    source = database_file(url)
    if source is None or not source.exists():
        raise InvalidInput(f"there is no database file to back up at {source}", "database")
    destination = destination.resolve()
    if destination.exists() and any(destination.iterdir()):
        raise InvalidInput(f"{destination} is not empty: give a new or empty directory, so no older backup's file "
                           "is taken for this one's", "directory")
    destination.mkdir(mode=0o700, parents=True, exist_ok=True)
    destination.chmod(0o700)  # an empty directory made before keeps its own mode otherwise (755: listable; helper 139)
    files = []
    for kept in (anchor_file, data_dir / SECRET_KEY):
        if kept.is_file():
            shutil.copyfile(kept, destination / kept.name)
            (destination / kept.name).chmod(0o600)
            files.append(kept.name)
    target = destination / DATABASE
    with sqlite3.connect(source) as live, sqlite3.connect(target) as copy:
        live.backup(copy)
        checked = copy.execute("PRAGMA integrity_check").fetchone()[0]
    live.close()
    copy.close()
    target.chmod(0o600)
    if checked != "ok":
        raise InvalidInput(f"the copy failed SQLite's integrity check ({checked}); {target} is not a backup",
                           "database")
    return Backup(destination, [DATABASE, *files], target.stat().st_size)
