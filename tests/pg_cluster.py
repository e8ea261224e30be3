"""A private PostgreSQL cluster per test process: initdb in a temp dir, a free port, databases from templates."""

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from tests.helpers import free_port, wait_for

SUPERUSER = "rebound"
# Durability buys nothing in a throwaway cluster; these make CREATE DATABASE and commits cheap.
SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "300",
            "shared_buffers": "64MB", "listen_addresses": "127.0.0.1", "log_min_messages": "warning",
            # Deadlocks are part of what the concurrency tests provoke; find them quickly.
            "deadlock_timeout": "200ms"}


def binaries() -> Path | None:
    """Return the directory of Debian's PostgreSQL server programs, or None when it is not installed."""
    for directory in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (directory / "initdb").exists():
            return directory
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _as_owner() -> list[str]:
    """PostgreSQL refuses to run as root; run its programs as the `postgres` account then."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


class Cluster:
    """One running cluster; `url(name)` addresses a database in it."""

    def __init__(self, settings: dict | None = None):
        programs = binaries()
        if programs is None:
            raise RuntimeError("PostgreSQL is not installed: `make test` installs Debian's postgresql")
        # Not under pytest's tmp dir: that one is private to the user running the tests, who may be root.
        self.directory = Path(tempfile.mkdtemp(prefix="rebound-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        self.port = free_port()
        data = self.directory / "data"
        owner = _as_owner()
        subprocess.run([*owner, str(programs / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
                        "--encoding=UTF8", "--locale=C", "--no-sync"], check=True, capture_output=True)
        options = " ".join(f"-c {key}={value}" for key, value in {**SETTINGS, **(settings or {})}.items())
        subprocess.run([*owner, str(programs / "pg_ctl"), "-D", str(data), "-l", str(self.directory / "server.log"),
                        "-o", f"-p {self.port} -k {self.directory} {options}", "-w", "start"],
                       check=True, capture_output=True)
        self._pg_ctl = [*owner, str(programs / "pg_ctl"), "-D", str(data)]
        self._admin = create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT", pool_size=1)

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def socket_url(self, database: str) -> str:
        """The same database reached through the cluster's Unix-domain socket (in its directory) instead of TCP."""
        return f"postgresql+psycopg://{SUPERUSER}@/{database}?host={self.directory}&port={self.port}"

    def create(self, template: str | None = None) -> str:
        """Create a new database, empty or a copy of `template`, and return its name."""
        name = "t_" + uuid.uuid4().hex[:16]
        # FILE_COPY copies the template's files in one step: faster than WAL_LOG for small databases.
        source = f" TEMPLATE {template} STRATEGY FILE_COPY" if template else ""
        with self._admin.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {name}{source}"))
        return name

    def drop(self, name: str):
        """Drop a database even if a test left a connection open to it."""
        with self._admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))

    def retire(self, name: str) -> str:
        """Disconnect everything from `name` and rename it; return the new name.

        A process a test left running (a server, a thread) then finds no database at the address it knew, as it
        would had the database been dropped, instead of writing into the next test's rows.
        """
        renamed = "t_" + uuid.uuid4().hex[:16]
        terminate = text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = :name AND pid <> pg_backend_pid()")

        def renamed_alone():
            with self._admin.connect() as connection:
                connection.execute(terminate, {"name": name})
                try:
                    connection.execute(text(f"ALTER DATABASE {name} RENAME TO {renamed}"))
                except OperationalError:  # a session was still leaving, or reconnected in between
                    return False
            return True

        wait_for(renamed_alone, 10, interval_s=0.01, what=f"{name} to have no session left")
        return renamed

    def wait_until_unused(self, name: str):
        """Wait until nothing is connected to `name`: CREATE DATABASE ... TEMPLATE needs it alone."""
        query = text("SELECT count(*) FROM pg_stat_activity WHERE datname = :name")

        def unused():
            with self._admin.connect() as connection:
                return connection.execute(query, {"name": name}).scalar() == 0

        wait_for(unused, 10, what=f"the last connection to {name} to close")

    def stop(self):
        self._admin.dispose()
        subprocess.run([*self._pg_ctl, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(self.directory, ignore_errors=True)
