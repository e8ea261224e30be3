"""The test databases on either backend: a blank one, a template sealed once, a cheap copy of it per test.

`REBOUND_TEST_DATABASE=postgresql` runs the suite on a private PostgreSQL cluster (tests/pg_cluster.py);
anything else, SQLite files in the tests' temp dirs.
"""

import contextlib
import os
import shutil
from pathlib import Path

from sqlalchemy.engine import make_url

from tests.helpers import DATABASE_FILE
from tests.pg_cluster import Cluster

BACKEND = "postgresql" if os.environ.get("REBOUND_TEST_DATABASE") == "postgresql" else "sqlite"


class SqliteDatabases:
    """A database is a file; a copy is a file copy."""

    def blank(self, directory: Path) -> str:
        return f"sqlite:///{directory / DATABASE_FILE}"

    def seal(self, url: str):
        """Nothing to do: the template's engine was disposed, so its WAL is already in the file."""

    @contextlib.contextmanager
    def copy(self, template_url: str, directory: Path):
        template = Path(make_url(template_url).database)
        copy = directory / template.name
        shutil.copyfile(template, copy)
        yield f"sqlite:///{copy}"

    def close(self):
        """Nothing to stop: the files go with the temp dirs."""


class PostgresDatabases:
    """A database is one of the private cluster's; a copy is CREATE DATABASE ... TEMPLATE, dropped afterwards."""

    def __init__(self):
        self.cluster = Cluster()

    def blank(self, directory: Path) -> str:
        return self.cluster.url(self.cluster.create())

    def seal(self, url: str):
        self.cluster.wait_until_unused(make_url(url).database)

    @contextlib.contextmanager
    def copy(self, template_url: str, directory: Path):
        name = self.cluster.create(template=make_url(template_url).database)
        try:
            yield self.cluster.url(name)
        finally:
            self.cluster.drop(name)

    def close(self):
        self.cluster.stop()


def open_databases():
    """Return the backend the suite runs on."""
    return PostgresDatabases() if BACKEND == "postgresql" else SqliteDatabases()
