"""Shared fixtures: a real Redis per test process, a fresh database per test, a movable clock, real processes.

Helpers live in tests/helpers.py and factories in tests/factories.py; this file keeps the fixtures.
"""

import contextlib
import contextvars
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.engine import make_url

from console import create_app
from console.domain.clock import FrozenClock
from console.extensions import db
from console.processes.embedded_redis import start as start_redis
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.people import users
from console.services.recovery import runbook_registry
from console.services.system import bootstrap
from tests.factories import BOOKKEEPING, BROKEN, LENIENT, RUNBOOK_SAMPLES, Runs, Saga
from tests.helpers import ARTIFACTS, DATABASE_FILE, PASSWORD, Auth, env_for, free_port, make_config, wait_for


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One real Redis server per test process (xdist worker), on a private socket."""
    url, process = start_redis(str(tmp_path_factory.mktemp("redis")))
    yield url
    if process is not None:
        process.terminate()
        process.wait(10)


@pytest.fixture
def redis_url(redis_server):
    """The Redis URL for one test, flushed before it starts."""
    redis.Redis.from_url(redis_server).flushdb()
    return redis_server


@pytest.fixture
def clock():
    return FrozenClock()


class IsolatedClient(FlaskClient):
    """A test client whose requests get their own app context, `g` and session, as in production."""

    def open(self, *args, **kwargs):
        # Without this, a request would reuse the test's app context and see its `g` and session.
        return contextvars.Context().run(super().open, *args, **kwargs)


@contextlib.contextmanager
def database_copy(template_url: str, tmp_path: Path):
    """Give one test its own copy of the session's template database: the one step each backend does its own way.

    SQLite copies the file (the template's engine was disposed, so its WAL is already in it). PostgreSQL would
    CREATE DATABASE ... TEMPLATE here and drop it on the way out.
    """
    template = Path(make_url(template_url).database)
    copy = tmp_path / template.name
    shutil.copyfile(template, copy)
    yield f"sqlite:///{copy}"


@pytest.fixture(scope="session")
def database_template(tmp_path_factory, redis_server) -> str:
    """Create the tables and the bootstrap rows once per test process; each test starts from a copy of them."""
    directory = tmp_path_factory.mktemp("template")
    app = create_app(make_config(directory, redis_server))
    with app.app_context():
        db.create_all()  # tables created directly; migrations have their own test
        bootstrap.ensure_ready()
        db.session.remove()
        db.engine.dispose()
    return app.config["SQLALCHEMY_DATABASE_URI"]


@pytest.fixture
def app(tmp_path, redis_url, database_template):
    """An app on a fresh database of its own: a copy of the template, so no test sees another's rows."""
    with database_copy(database_template, tmp_path) as url:
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


@pytest.fixture
def redis_down(app):
    """Point the app at a port where no Redis listens, for pages that must degrade, not fail."""
    working = app.extensions["rebound_redis"]
    # Retried as the app's own client is (once, quickly): redis-py's default backoff took 15 s for one page.
    app.extensions["rebound_redis"] = redis.Redis(port=free_port(), socket_connect_timeout=1,
                                                  retry=working.get_retry())
    yield
    app.extensions["rebound_redis"] = working


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory, redis_server) -> str:
    """Migrate a database and add the admin once per test process, through the CLI; each live server gets a copy."""
    directory = tmp_path_factory.mktemp("migrated")
    env = {**os.environ, "REBOUND_DATA_DIR": str(directory), "REBOUND_REDIS_URL": redis_server,
           "REBOUND_SECRET_KEY": "migrated-template", "REBOUND_LOG_LEVEL": "WARNING"}
    rebound = [sys.executable, "-m", "console.cli"]
    subprocess.run([*rebound, "db", "upgrade"], env=env, check=True, capture_output=True)
    subprocess.run([*rebound, "create-user", "admin", "--role", "admin", "--password", PASSWORD],
                   env=env, check=True, capture_output=True)
    return f"sqlite:///{directory / DATABASE_FILE}"


@contextlib.contextmanager
def web_server(data_dir: Path, redis_url: str, migrated_template: str):
    """Run a real `rebound web` process on a free port, over a copy of the migrated database with an admin."""
    with database_copy(migrated_template, data_dir) as database_url:
        env = {**os.environ, "REBOUND_DATA_DIR": str(data_dir), "REBOUND_REDIS_URL": redis_url,
               "REBOUND_DATABASE_URL": database_url, "REBOUND_ADMIN_PASSWORD": PASSWORD,
               "REBOUND_SECRET_KEY": "live-" + data_dir.name, "REBOUND_PORT": str(free_port()),
               "REBOUND_LOG_LEVEL": "WARNING"}
        log = (data_dir / "web.log").open("w")
        process = subprocess.Popen([sys.executable, "-m", "console.cli", "web", "--threads", "4"], env=env,
                                   stdout=log, stderr=log)

        def healthy():
            try:
                return socket.create_connection(("127.0.0.1", int(env["REBOUND_PORT"])), timeout=0.2)
            except OSError:
                assert process.poll() is None, (data_dir / "web.log").read_text()
                return None

        try:
            wait_for(healthy, 20, what="the web server to listen").close()
            yield type("Server", (), {"url": f"http://127.0.0.1:{env['REBOUND_PORT']}", "env": env,
                                      "data_dir": data_dir})
        finally:  # also when the caller fails inside the with: an orphaned server would outlive the tests
            process.terminate()  # graceful; quick once the browser's connections are closed (tests/browser/conftest.py)
            process.wait(15)
            log.close()


@pytest.fixture
def live_server(tmp_path, redis_url, migrated_template):
    """A real `rebound web` process on a free port, over a migrated database with an admin."""
    with web_server(tmp_path, redis_url, migrated_template) as server:
        yield server


@contextlib.contextmanager
def app_beside(server):
    """An app in the test process on a live server's database and Redis, to arrange data through services."""
    env = server.env
    app = create_app({"TESTING": True, "DATA_DIR": env["REBOUND_DATA_DIR"], "REDIS_URL": env["REBOUND_REDIS_URL"],
                      "SQLALCHEMY_DATABASE_URI": env["REBOUND_DATABASE_URL"],
                      "SECRET_KEY": env["REBOUND_SECRET_KEY"]})
    with app.app_context():
        bootstrap.ensure_ready()
        yield app
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def live_app(live_server):
    """An app in the test process on the live server's database and Redis, to arrange data through services."""
    with app_beside(live_server) as app:
        yield app


@pytest.fixture
def live_worker(live_server):
    """A real `rebound worker` beside the live server, on the same database and Redis."""
    log = (live_server.data_dir / "worker.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "console.cli", "worker"], env=live_server.env, stdout=log,
                               stderr=subprocess.STDOUT)
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
        process = subprocess.Popen([sys.executable, "-m", "console.cli", "worker", "--kind", kind],
                                   env={**env_for(app), **env}, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        started.append((process, log))
        return process

    yield start
    for process, _ in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process, log in started:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
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
