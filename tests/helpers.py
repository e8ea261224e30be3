"""Helpers the tests share: polling with a deadline, config and environment of a test app, processes, logging in."""

import html
import os
import re
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlencode

from console.processes import stacks
from console.services.actor import Actor
from console.services.people import users

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
PASSWORD = "correct-horse-battery"
DATABASE_FILE = "rebound.db"
# One audit key for every test database and its copies (a template's rows are chained with it).
AUDIT_KEY = "test-audit-key"


def make_config(tmp_path: Path, redis_url: str, **extra) -> dict:
    """Return the config mapping of an app with its own data dir and SQLite file."""
    return {
        "TESTING": True,
        "DATA_DIR": str(tmp_path),
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / DATABASE_FILE}",
        "REDIS_URL": redis_url,
        "SECRET_KEY": "test-secret-" + tmp_path.name,
        "AUDIT_KEY": AUDIT_KEY,
        "LOGIN_RATE_LIMIT": "1000 per minute",
        # Fast liveness checks, so worker-loss tests finish in seconds.
        "HEARTBEAT_S": 0.2,
        "STALE_AFTER_S": 2.0,
        "REQUEUE_AFTER_S": 1.0,
        **extra,
    }


ENV_OF = {"DATA_DIR": "REBOUND_DATA_DIR", "SQLALCHEMY_DATABASE_URI": "REBOUND_DATABASE_URL",
          "REDIS_URL": "REBOUND_REDIS_URL", "SECRET_KEY": "REBOUND_SECRET_KEY", "AUDIT_KEY": "REBOUND_AUDIT_KEY",
          "HEARTBEAT_S": "REBOUND_HEARTBEAT_S",
          "STALE_AFTER_S": "REBOUND_STALE_AFTER_S", "REQUEUE_AFTER_S": "REBOUND_REQUEUE_AFTER_S",
          "PLUGIN_RUNTIME_URL": "REBOUND_PLUGIN_RUNTIME_URL", "COMMANDS_FILE": "REBOUND_COMMANDS_FILE"}


def env_for(app) -> dict:
    """Return the environment a child process needs to act on the same database and Redis as `app`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("REBOUND_")}
    env.update({name: str(app.config[key]) for key, name in ENV_OF.items() if app.config.get(key)})
    env.update(REBOUND_LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1")
    return env


def wait_for(predicate, timeout_s: float = 15.0, interval_s: float = 0.05, what: str = "condition"):
    """Poll until predicate() is truthy; fail with `what` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def wait_stopped(process: subprocess.Popen, log_path: Path, timeout_s: float = 15.0) -> None:
    """Wait for a process asked to stop; if it does not, fail with its stacks and log (and kill it)."""
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        stacks.dump(process.pid)  # written to its log: where it hangs
        process.kill()
        process.wait()
        raise AssertionError(f"pid {process.pid} did not stop within {timeout_s:.0f} s; its log:\n"
                             f"{log_path.read_text(errors='replace')[-20_000:]}") from None


HX = {"HX-Request": "true"}  # what htmx sends: the answer is the fragment it swaps in
CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"|name="csrf_token" value="([^"]+)"')


def csrf_from(html: str) -> str:
    """Pull the CSRF token out of a rendered form."""
    match = CSRF.search(html)
    assert match, "no CSRF token in the page"
    return match.group(1) or match.group(2)


def confirm_of(page: str, action: str) -> str:
    """Return the hx-confirm of the form posting to `action`, as the browser reads it ('' when it asks nothing)."""
    form = re.search(rf'<form[^>]*action="{re.escape(action)}"[^>]*>', page, re.S)
    assert form, action
    found = re.search(r'hx-confirm="([^"]*)"', form.group(0))
    return " ".join(html.unescape(found.group(1)).split()) if found else ""


def assert_marked(html: str, tag: str, field_id: str, message: str):
    """Assert a refused field is marked invalid and names its error, which says `message` and is announced."""
    field = re.search(rf'<{tag}[^>]*\bid="{re.escape(field_id)}"[^>]*>', html)
    assert field, f"no <{tag} id={field_id}>"
    assert 'aria-invalid="true"' in field.group(0), field.group(0)
    assert re.search(rf'aria-describedby="(?:[^"]* )?{re.escape(field_id)}-error[ "]', field.group(0)), field.group(0)
    error = re.search(rf'<div class="field-error" role="alert" id="{re.escape(field_id)}-error">([^<]*)<', html)
    assert error and message in error.group(1), html[-2000:]


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


def browser_login(page, base: str, username: str = "admin", password: str = PASSWORD, then: str | None = None):
    """Log in through the login form in a real browser; with `then` (a path), land there, loaded, as the form's
    `next` takes a person (else on the Overview, not waited for)."""
    page.goto(f"{base}/login" + (f"?{urlencode({'next': then})}" if then else ""))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    if then is None:
        page.get_by_role("button", name="Log in").click()
        return
    # Landing on the page asked for spares a browser test the Overview it would leave at once: its charts were the
    # dearest page load of most tests.
    with page.expect_navigation(url=lambda url: not url.startswith(f"{base}/login")):  # `then`, or where it redirects
        page.get_by_role("button", name="Log in").click()
