"""The test databases on either backend: a blank one, a template sealed once, a cheap copy of it per test.

`REBOUND_TEST_DATABASE=postgresql` runs the suite on a private PostgreSQL cluster (tests/pg_cluster.py);
anything else, SQLite files in the tests' temp dirs.
"""

import contextlib
import os
import shutil
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from console import create_app
from console.extensions import db
from console.services.system import bootstrap
from tests import pg_recycle
from tests.helpers import DATABASE_FILE, make_config
from tests.pg_cluster import Cluster

BACKEND = "postgresql" if os.environ.get("REBOUND_TEST_DATABASE") == "postgresql" else "sqlite"


class Databases:
    """What both backends do alike."""

    def template(self, directory: Path, redis_url: str, fill=None) -> str:
        """Return a sealed template: the tables and bootstrap rows, and whatever `fill()` adds inside its app."""
        url = self.blank(directory)
        app = create_app(make_config(directory, redis_url, SQLALCHEMY_DATABASE_URI=url))
        with app.app_context():
            db.create_all()  # tables created directly; migrations have their own test
            bootstrap.ensure_ready()
            if fill:
                fill()
            db.session.remove()
            db.engine.dispose()
        self.seal(url)
        return url


class SqliteDatabases(Databases):
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


class PostgresDatabases(Databases):
    """A database is one of the private cluster's; a copy is CREATE DATABASE ... TEMPLATE, then reused.

    A copy a test has finished with is renamed (whatever the test left running loses it) and goes back to its
    template's free list; the next test takes it refilled with the template's rows (tests/pg_recycle.py).
    Copying the template again cost a second a test.
    """

    def __init__(self):
        self.cluster = Cluster()
        self._free: dict[str, list[str]] = {}
        self._snapshots: dict[str, pg_recycle.Snapshot] = {}

    def blank(self, directory: Path) -> str:
        return self.cluster.url(self.cluster.create())

    def seal(self, url: str):
        self.cluster.wait_until_unused(make_url(url).database)

    @contextlib.contextmanager
    def copy(self, template_url: str, directory: Path):
        template = make_url(template_url).database
        name = self._take(template)
        try:
            yield self.cluster.url(name)
        finally:
            self._free.setdefault(template, []).append(self.cluster.retire(name))

    def _take(self, template: str) -> str:
        """Return a database holding exactly the template's rows: a reused one refilled, else a new copy."""
        free = self._free.get(template, [])
        while free:
            name = free.pop()
            try:
                pg_recycle.restore(make_url(self.cluster.url(name)), self._snapshots[template])
                return name
            except (ValueError, psycopg.Error):
                self.cluster.drop(name)  # a test changed its schema, or left it unusable: never reuse it
        name = self.cluster.create(template=template)
        if template not in self._snapshots:
            self._snapshots[template] = pg_recycle.take(make_url(self.cluster.url(name)))
        return name

    def close(self):
        self.cluster.stop()


def open_databases():
    """Return the backend the suite runs on."""
    return PostgresDatabases() if BACKEND == "postgresql" else SqliteDatabases()
