"""Shared fixtures: a real Redis per test process, a fresh database per test, a movable clock, real processes.

Helpers live in tests/helpers.py and factories in tests/factories.py; this file keeps the fixtures.
"""

import contextlib
import contextvars
import functools
import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from jinja2 import BytecodeCache
from playwright.sync_api import Error as PlaywrightError
from sqlalchemy import select

from console import create_app
from console.domain.clock import FrozenClock
from console.extensions import db
from console.processes.embedded_redis import start as start_redis
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.people import users
from console.services.recovery import runbook_registry
from tests import console_forks
from tests.databases import BACKEND, open_databases
from tests.factories import BOOKKEEPING, BROKEN, LENIENT, RUNBOOK_SAMPLES, Runs, Saga
from tests.helpers import ARTIFACTS, AUDIT_KEY, PASSWORD, Auth, env_for, free_port, make_config, wait_stopped
from tests.route_builders import remembered as remembered_url_builders
from tests.servers import app_beside, web_server


@pytest.fixture(scope="session", autouse=True)
def remembered_password_hashes():
    """Hash each password once per test process, and check each (hash, password) once: real scrypt, same answers.

    A hash or check costs 0.1-0.2 s by design, and most tests create or log in a user: minutes of the suite.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(users, "generate_password_hash", functools.lru_cache(users.generate_password_hash))
        patch.setattr(users, "check_password_hash", functools.lru_cache(users.check_password_hash))
        yield


@pytest.fixture(scope="session", autouse=True)
def url_builders_compiled_once():
    """Compile each route's URL builder once per test process, not once per app (tests/route_builders.py)."""
    with remembered_url_builders():
        yield


class _CompiledTemplates(BytecodeCache):
    """Each template's compiled code, kept per test process and given to every app whose source matches."""

    def __init__(self):
        self.codes = {}

    def load_bytecode(self, bucket):
        checksum, code = self.codes.get(bucket.key, (None, None))
        if checksum == bucket.checksum:  # the template's source is unchanged: its code is still right
            bucket.code = code

    def dump_bytecode(self, bucket):
        self.codes[bucket.key] = (bucket.checksum, bucket.code)


@pytest.fixture(scope="session", autouse=True)
def templates_compiled_once():
    """Compile each template once per test process, not once per app: a third of a console test's time was Jinja's.

    Jinja's bytecode cache is its public way to skip compiling; a new app otherwise compiles every page it renders.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Flask, "jinja_options", {**Flask.jinja_options, "bytecode_cache": _CompiledTemplates()})
        yield


# Files that spend most of a minute waiting on real time (a minute boundary, a lapsing lock, processes starting and
# dying) while the CPU is free. `make test` hands out files in collection order (--no-loadscope-reorder): xdist's own
# order, most tests first, left these one-test files for last, one worker waiting alone for a minute at the end.
# Collection order otherwise suits the workers: the browser files, slowest, come first and the quick unit and web
# files last. (tests/engine/test_retry_flow.py was one of these, and its hung-handler test then failed once at the
# very start of the PostgreSQL pass: its worker sat 20 s in a database query. Left in its place, it passes.)
WAITING_FILES = ("tests/scheduler/test_leader_failover.py", "tests/integration/test_up.py",
                 "tests/integration/test_schemathesis.py")


# The browser files PostgreSQL runs too: every page rendered (the desktop walk) and each role's day, end to end with a
# real worker. The other browser files check what the page does (its scripts, forms, focus, live parts) over services
# whose own tests run on both databases; on PostgreSQL they took a quarter of the pass.
BROWSER_ON_POSTGRESQL = ("test_page_walk.py", "test_operators_day.py", "test_approvers_day.py",
                         "test_managers_day.py", "test_on_call_flow.py")


def _once(item) -> bool:
    """Tell whether a test runs on SQLite only (see the markers in pyproject.toml, and the browser files above)."""
    if any(item.get_closest_marker(name) for name in ("sqlite_only", "layout", "once")):
        return True
    return item.path.parent.name == "browser" and item.path.name not in BROWSER_ON_POSTGRESQL


def pytest_collection_modifyitems(config, items):
    """On PostgreSQL, keep only the tests that touch a database; then order the files for the workers (above)."""
    if BACKEND == "postgresql":
        keep, drop = [], []
        for item in items:
            touches = "databases" in getattr(item, "fixturenames", ())
            (keep if touches and not _once(item) else drop).append(item)
        items[:] = keep
        config.hook.pytest_deselected(items=drop)
    else:
        drop = [item for item in items if item.get_closest_marker("postgresql_only")]
        if drop:
            items[:] = [item for item in items if not item.get_closest_marker("postgresql_only")]
            config.hook.pytest_deselected(items=drop)
    items[:] = _waiting_beside_busy(items)


def _waiting_beside_busy(items: list) -> list:
    """The waiting files first, each beside a busy one, so that one worker waits while the other computes."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.partition("::")[0], []).append(item)
    waiting = [name for name in WAITING_FILES if name in files]
    busy = [name for name in files if name not in waiting]
    paired = itertools.zip_longest(waiting, busy)  # longest: a run of waiting files alone keeps every one
    order = [name for pair in paired for name in pair if name is not None]
    return [item for name in order for item in files[name]]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One real Redis server per test process (xdist worker), on a private socket."""
    url, process = start_redis(str(tmp_path_factory.mktemp("redis")), databases=REDIS_DATABASES)
    yield url
    if process is not None:
        process.terminate()
        process.wait(10)


# Each test has a Redis database of its own, not used by the tests before it in this process: a process one of them
# left behind (an RQ scheduler forked by a worker it killed) writes into that test's database only. One such left its
# scheduler locks in a later test's shared database under four test workers.
REDIS_DATABASES = 4096
_next_redis_database = itertools.count(1)


@pytest.fixture
def redis_url(redis_server):
    """The Redis URL for one test: a database of its own, flushed before it starts."""
    url = f"{redis_server}?db={next(_next_redis_database) % REDIS_DATABASES}"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def clock():
    return FrozenClock()


class IsolatedClient(FlaskClient):
    """A test client whose requests get their own app context, `g` and session, as in production."""

    def open(self, *args, **kwargs):
        # Without this, a request would reuse the test's app context and see its `g` and session.
        return contextvars.Context().run(super().open, *args, **kwargs)


@pytest.fixture(scope="session")
def databases():
    """The backend this run tests on (SQLite files, or a private PostgreSQL cluster): see tests/databases.py."""
    backend = open_databases()
    yield backend
    backend.close()


@pytest.fixture
def blank_database(tmp_path, databases) -> str:
    """The URL of an empty database of this test's own, for tests that build the schema themselves."""
    return databases.blank(tmp_path)


@pytest.fixture(scope="session")
def database_template(tmp_path_factory, redis_server, databases) -> str:
    """Create the tables and the bootstrap rows once per test process; each test starts from a copy of them."""
    return databases.template(tmp_path_factory.mktemp("template"), redis_server)


@pytest.fixture
def app(tmp_path, redis_url, database_template, databases):
    """An app on a fresh database of its own: a copy of the template, so no test sees another's rows."""
    with databases.copy(database_template, tmp_path) as url:
        app = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=url))
        app.test_client_class = IsolatedClient
        with app.app_context():
            yield app
            db.session.remove()
            db.engine.dispose()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def auth(client):
    return Auth(client)


@contextlib.contextmanager
def redis_unreachable(app: Flask):
    """Point the app at a port where no Redis listens, for pages that must degrade, not fail."""
    working = app.extensions["rebound_redis"]
    # Retried as the app's own client is (once, quickly): redis-py's default backoff took 15 s for one page.
    app.extensions["rebound_redis"] = redis.Redis(port=free_port(), socket_connect_timeout=1,
                                                  retry=working.get_retry())
    try:
        yield
    finally:
        app.extensions["rebound_redis"] = working


@pytest.fixture
def redis_down(app):
    """The app's Redis unreachable for the whole test (redis_unreachable)."""
    with redis_unreachable(app):
        yield


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory, redis_server, databases) -> str:
    """Migrate a database and add the admin once per test process, through the CLI; each live server gets a copy."""
    directory = tmp_path_factory.mktemp("migrated")
    url = databases.blank(directory)
    env = {**os.environ, "REBOUND_DATA_DIR": str(directory), "REBOUND_REDIS_URL": redis_server,
           "REBOUND_DATABASE_URL": url, "REBOUND_SECRET_KEY": "migrated-template", "REBOUND_AUDIT_KEY": AUDIT_KEY,
           "REBOUND_LOG_LEVEL": "WARNING"}
    rebound = [sys.executable, "-m", "console.cli"]
    subprocess.run([*rebound, "db", "upgrade"], env=env, check=True, capture_output=True)
    subprocess.run([*rebound, "create-user", "admin", "--role", "admin", "--password", PASSWORD],
                   env=env, check=True, capture_output=True)
    databases.seal(url)
    return url


@pytest.fixture
def live_server(tmp_path, redis_url, migrated_template, databases):
    """A real `rebound web` process on a free port, over a migrated database with an admin."""
    with web_server(tmp_path, redis_url, migrated_template, databases) as server:
        yield server


@pytest.fixture
def live_app(live_server):
    """An app in the test process on the live server's database and Redis, to arrange data through services."""
    with app_beside(live_server) as app:
        yield app


@pytest.fixture
def live_worker(live_server):
    """A real `rebound worker` beside the live server, on the same database and Redis."""
    log = (live_server.data_dir / "worker.log").open("w")
    process = console_forks.start(["worker"], live_server.env, stdout=log, stderr=subprocess.STDOUT)
    yield process
    process.terminate()
    process.wait(15)
    log.close()


@pytest.fixture(scope="session")
def browser_type_launch_args():
    """Drive Debian's Chromium (Playwright's own download is not available here)."""
    return {
        "executable_path": "/usr/bin/chromium",
        "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"],
    }


@pytest.fixture
def screenshot(page):
    """Save a full-page screenshot under tests/artifacts/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(name: str):
        path = ARTIFACTS / f"{name}.png"
        if BACKEND == "postgresql":  # the SQLite pass took the same picture
            return path
        # Chromium under load now and then answers "Unable to capture screenshot" for one frame;
        # the picture is documentation, so a second try is honest and a third failure is real.
        for _ in range(2):
            try:
                page.screenshot(path=str(path), full_page=True)
                return path
            except PlaywrightError as error:
                if "Unable to capture screenshot" not in str(error):
                    raise
                page.wait_for_timeout(200)
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def workers(app, tmp_path):
    """Start real `rebound worker` processes on the test's database and Redis."""
    started = []

    def start(kind: str = "simple", **env):
        log = (tmp_path / f"worker-{len(started)}.log").open("w")
        # Its own process group, so the teardown can reach what the worker forks: RQ's scheduler.
        process = console_forks.start(["worker", "--kind", kind], {**env_for(app), **env}, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        started.append((process, log))
        return process

    yield start
    for process, _ in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process, log in started:
        try:
            wait_stopped(process, Path(log.name))
        except AssertionError as hung:
            print(hung)  # shown with the test's report: its stacks and log
        # A worker the test killed (SIGKILL) left its RQ scheduler running on this process's Redis, where it
        # would re-take the locks after the next test's flush and move that test's due delayed jobs.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


@pytest.fixture
def runs(app):
    return Runs()


@pytest.fixture
def saga(app, clock):
    return Saga(clock)


@pytest.fixture
def samples(app):
    """Register the test runbooks beside the shipped ones (workers get REBOUND_RUNBOOK_MODULES)."""
    app.config["RUNBOOK_MODULES"] = RUNBOOK_SAMPLES
    runbook_registry.init_app(app)
    yield ",".join(RUNBOOK_SAMPLES)
    app.config["RUNBOOK_MODULES"] = ["jobs.runbooks"]
    runbook_registry.init_app(app)


@pytest.fixture
def staff(app):
    """An operator, two approvers and an admin, as the actors services see."""
    made = {}
    for name, role in (("olga", "operator"), ("alex", "approver"), ("bea", "approver"), ("ada", "admin")):
        user, _ = users.create(name, role, PASSWORD, Actor("test"))
        made[name] = Actor(name, user.id)
    return made


@pytest.fixture
def dead_run(app, clock):
    """Make a run of tenant `tenant` dead (a non-retryable failure) and return (run id, its dead letter id)."""
    runs = Runs()

    def make(tenant: str = "default", **params) -> tuple[int, int]:
        run_id = runs.submit("demo.flaky", {**BROKEN, **params}, policy=LENIENT, tenant=tenant)
        assert execute(run_id, 0, clock=clock) == "dead"
        (letter,) = runs.dead_letters(run_id)
        return run_id, letter.id

    return make


@pytest.fixture
def snapshot(redis_url):
    """Return every table's rows (but the executions' own bookkeeping) and Redis's keys, to compare before/after."""
    connection = redis.Redis.from_url(redis_url)

    def take() -> dict:
        db.session.commit()
        with db.engine.connect() as conn:
            tables = {table.name: sorted(map(repr, conn.execute(select(table)).all()))
                      for table in db.metadata.sorted_tables if table.name not in BOOKKEEPING}
        keys = sorted(connection.keys())
        return {"tables": tables, "redis": {key: connection.type(key) for key in keys}}

    return take
