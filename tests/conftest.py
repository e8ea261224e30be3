"""Shared fixtures: a real Redis per test process, a fresh database per test, a movable clock."""

import contextvars
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from flask.testing import FlaskClient

from console import create_app
from console.domain.clock import FrozenClock
from console.extensions import db
from console.models import Tenant
from console.processes.embedded_redis import start as start_redis
from console.services.actor import Actor
from console.services.people import tokens, users
from console.services.system import bootstrap

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
PASSWORD = "correct-horse-battery"


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


def make_config(tmp_path: Path, redis_url: str, **extra) -> dict:
    """Return the config mapping of an app with its own data dir and SQLite file."""
    return {
        "TESTING": True,
        "DATA_DIR": str(tmp_path),
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'rebound.db'}",
        "REDIS_URL": redis_url,
        "SECRET_KEY": "test-secret-" + tmp_path.name,
        "LOGIN_RATE_LIMIT": "1000 per minute",
        # Fast liveness checks, so worker-loss tests finish in seconds.
        "HEARTBEAT_S": 0.2,
        "STALE_AFTER_S": 2.0,
        "REQUEUE_AFTER_S": 1.0,
        **extra,
    }


ENV_OF = {"DATA_DIR": "REBOUND_DATA_DIR", "SQLALCHEMY_DATABASE_URI": "REBOUND_DATABASE_URL",
          "REDIS_URL": "REBOUND_REDIS_URL", "SECRET_KEY": "REBOUND_SECRET_KEY", "HEARTBEAT_S": "REBOUND_HEARTBEAT_S",
          "STALE_AFTER_S": "REBOUND_STALE_AFTER_S", "REQUEUE_AFTER_S": "REBOUND_REQUEUE_AFTER_S",
          "PLUGIN_RUNTIME_URL": "REBOUND_PLUGIN_RUNTIME_URL", "COMMANDS_FILE": "REBOUND_COMMANDS_FILE"}


def env_for(app) -> dict:
    """Return the environment a child process needs to act on the same database and Redis as `app`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("REBOUND_")}
    env.update({name: str(app.config[key]) for key, name in ENV_OF.items() if app.config.get(key)})
    env.update(REBOUND_LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1")
    return env


class IsolatedClient(FlaskClient):
    """A test client whose requests get their own app context, `g` and session, as in production."""

    def open(self, *args, **kwargs):
        # Without this, a request would reuse the test's app context and see its `g` and session.
        return contextvars.Context().run(super().open, *args, **kwargs)


@pytest.fixture
def app(tmp_path, redis_url):
    """An app on a fresh database (tables created directly; migrations have their own test)."""
    app = create_app(make_config(tmp_path, redis_url))
    app.test_client_class = IsolatedClient
    with app.app_context():
        db.create_all()
        bootstrap.ensure_ready()
        yield app
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def client(app):
    return app.test_client()


CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"|name="csrf_token" value="([^"]+)"')


def csrf_from(html: str) -> str:
    """Pull the CSRF token out of a rendered form."""
    match = CSRF.search(html)
    assert match, "no CSRF token in the page"
    return match.group(1) or match.group(2)


class Auth:
    """Log people in and out through the real login form."""

    def __init__(self, client):
        self.client = client

    def make_user(self, username: str, role: str, tenant=None):
        user, _ = users.create(username, role, PASSWORD, Actor("test"), tenant=tenant)
        return user

    def login(self, username: str, password: str = PASSWORD):
        page = self.client.get("/login")
        return self.client.post("/login", data={"username": username, "password": password,
                                                "csrf_token": csrf_from(page.get_data(as_text=True))})

    def as_role(self, role: str, username: str | None = None):
        """Create a user with this role and log in as them."""
        user = self.make_user(username or role, role)
        response = self.login(user.username)
        assert response.status_code == 302, response.get_data(as_text=True)
        return user

    def csrf(self, path: str = "/overview") -> str:
        """Return a CSRF token valid for the logged-in session."""
        return csrf_from(self.client.get(path).get_data(as_text=True))


@pytest.fixture
def auth(client):
    return Auth(client)


def bearer(user, tenant=None) -> dict:
    """Return the Authorization header of a new token acting as `user` (optionally limited to a tenant)."""
    _, plaintext = tokens.issue(user, Actor("test"), tenant=tenant)
    return {"Authorization": f"Bearer {plaintext}"}


def make_tenant(name: str) -> Tenant:
    """Create a tenant with the default quotas."""
    tenant = Tenant(name=name)
    db.session.add(tenant)
    db.session.commit()
    return tenant


@pytest.fixture
def redis_down(app):
    """Point the app at a port where no Redis listens, for pages that must degrade, not fail."""
    working = app.extensions["rebound_redis"]
    app.extensions["rebound_redis"] = redis.Redis(port=free_port(), socket_connect_timeout=1)
    yield
    app.extensions["rebound_redis"] = working


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout_s: float = 15.0, interval_s: float = 0.05, what: str = "condition"):
    """Poll until predicate() is truthy; fail with `what` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _state_and_parent(stat: Path) -> tuple[str, int] | None:
    """Read a process's state letter and parent pid from its /proc stat file; None if it is gone."""
    try:
        state, ppid = stat.read_text().rpartition(")")[2].split()[:2]
    except OSError:
        return None
    return state, int(ppid)


def process_alive(pid: int) -> bool:
    """Whether the process exists and has not exited (a zombie not yet reaped counts as ended)."""
    found = _state_and_parent(Path(f"/proc/{pid}/stat"))
    return found is not None and found[0] != "Z"


def living_children(pid: int) -> set[int]:
    """Return the processes whose parent is `pid` and that have not exited."""
    return {int(stat.parent.name) for stat in Path("/proc").glob("[0-9]*/stat")
            if (found := _state_and_parent(stat)) and found[1] == pid and found[0] != "Z"}


@pytest.fixture
def live_server(tmp_path, redis_url):
    """A real `rebound web` process on a free port, over a migrated database with an admin."""
    env = {**os.environ, "REBOUND_DATA_DIR": str(tmp_path), "REBOUND_REDIS_URL": redis_url,
           "REBOUND_ADMIN_PASSWORD": PASSWORD, "REBOUND_SECRET_KEY": "live-" + tmp_path.name,
           "REBOUND_PORT": str(free_port()), "REBOUND_LOG_LEVEL": "WARNING"}
    rebound = [sys.executable, "-m", "console.cli"]
    subprocess.run([*rebound, "db", "upgrade"], env=env, check=True, capture_output=True)
    subprocess.run([*rebound, "create-user", "admin", "--role", "admin", "--password", PASSWORD],
                   env=env, check=True, capture_output=True)
    log = (tmp_path / "web.log").open("w")
    process = subprocess.Popen([*rebound, "web", "--threads", "4"], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{env['REBOUND_PORT']}"

    def healthy():
        try:
            return socket.create_connection(("127.0.0.1", int(env["REBOUND_PORT"])), timeout=0.2)
        except OSError:
            assert process.poll() is None, (tmp_path / "web.log").read_text()
            return None

    wait_for(healthy, 20, what="the web server to listen").close()
    yield type("Server", (), {"url": base, "env": env, "data_dir": tmp_path})
    process.terminate()
    process.wait(15)
    log.close()


@pytest.fixture
def live_app(live_server):
    """An app in the test process on the live server's database and Redis, to arrange data through services."""
    env = live_server.env
    app = create_app({"TESTING": True, "DATA_DIR": env["REBOUND_DATA_DIR"], "REDIS_URL": env["REBOUND_REDIS_URL"],
                      "SQLALCHEMY_DATABASE_URI": f"sqlite:///{live_server.data_dir / 'rebound.db'}",
                      "SECRET_KEY": env["REBOUND_SECRET_KEY"]})
    with app.app_context():
        bootstrap.ensure_ready()
        yield app
        db.session.remove()
        db.engine.dispose()


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
