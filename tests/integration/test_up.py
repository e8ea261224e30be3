"""`rebound up` on an empty data dir: embedded Redis, migrations, first admin, supervised children."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys

import redis
import requests

from console.processes.embedded_redis import socket_path_of
from console.processes.embedded_redis import start as start_redis
from tests.helpers import free_port, living_children, process_alive, wait_for

HEALTHY = {"database": "ok", "redis": "ok", "status": "ok"}


def test_up_starts_everything_restarts_a_dead_child_and_stops_on_ctrl_c(tmp_path):
    up, port, log_path = _start_up(tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        assert wait_for(lambda: _health(up, port, log_path), 60, 0.2, "the console to answer") == HEALTHY
        wait_for(lambda: "Rebound is ready" in log_path.read_text(), 30, 0.1, "the ready line")
        output = log_path.read_text()
        password = re.search(r"password: (\S+)", output).group(1)
        # Said twice on the console (at creation and at "ready"), and the ready line comes after the start-up lines.
        ready_at = output.index(f"Rebound is ready: http://127.0.0.1:{port}")
        assert output.count(f"password: {password}") == 2 and output.rindex(password) > ready_at
        assert output.index("started web (pid") < ready_at
        # A second console on the same data dir is refused before it touches anything: it would share the SQLite
        # file, and on its exit stop the first one's Redis.
        second = subprocess.run([sys.executable, "-m", "console.cli", "up"], env=_env(tmp_path, free_port()),
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and f"a console already runs on the data dir {tmp_path} (rebound up, pid " \
            f"{up.pid})" in second.stderr, second.stderr
        assert _health(up, port, log_path) == HEALTHY
        # Nor does another console (or a lone web) on this port start: granian's SO_REUSEPORT let both listen, and
        # the kernel split the requests between two consoles (helper 118).
        other = tmp_path / "other"
        other.mkdir()
        for command in (["up"], ["web"]):
            taken = subprocess.run([sys.executable, "-m", "console.cli", *command], env=_env(other, port),
                                   capture_output=True, text=True, timeout=60)
            assert taken.returncode == 1 and f"127.0.0.1:{port} is taken" in taken.stderr, taken.stderr
        assert _health(up, port, log_path) == HEALTHY
        # The supervisor keeps no connection to the database it migrated: at its exit, one still open checkpointed
        # its WAL into a rebound.db restored meanwhile from a backup, and corrupted it (run rows lost).
        held = [os.readlink(f"/proc/{up.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{up.pid}/fd")]
        assert not [path for path in held if "rebound.db" in path], held
        # Never in a file of the data dir (the console output here is up.log, which the test itself writes).
        for path in tmp_path.rglob("*"):
            if path.is_file() and path != log_path:
                assert password.encode() not in path.read_bytes(), path
        session = requests.Session()
        login_page = session.get(f"{base}/login").text
        csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', login_page).group(1)
        response = session.post(f"{base}/login", data={"username": "admin", "password": password,
                                                       "csrf_token": csrf}, allow_redirects=False)
        assert response.status_code == 302

        worker_pid = int(wait_for(lambda: re.search(r"started worker-1 \(pid (\d+)\)", log_path.read_text()),
                                  30, 0.1, "the worker to start").group(1))
        os.kill(worker_pid, signal.SIGKILL)
        wait_for(lambda: "worker-1 exited with code -9; restarting" in log_path.read_text(), 30, 0.1,
                 "the restart to be logged")
        wait_for(lambda: len(re.findall(r"started worker-1 \(pid", log_path.read_text())) == 2, 30, 0.1,
                 "the worker to come back")
        lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
        assert {"up", "web", "scheduler"} <= {line["process"] for line in lines}
        assert "MainProcess" not in log_path.read_text()
        assert not [line for line in lines if line["logger"] == "granian.access"]  # the health polls above
        assert [line for line in lines if line["logger"] == "_granian" and line["process"] == "web"]
    finally:
        # Ctrl-C in a terminal signals the whole foreground process group.
        os.killpg(up.pid, signal.SIGINT)
        code = up.wait(30)
    assert code == 0, log_path.read_text()
    assert "all processes stopped" in log_path.read_text()
    assert not (tmp_path / "redis.sock").exists()


def test_up_keeps_its_redis_when_the_one_it_found_goes_away_or_its_own_dies(tmp_path):
    # A previous console still stopping (waiting for a long job) left its Redis answering on the data dir's socket.
    _, previous = start_redis(str(tmp_path))
    up, port, log_path = _start_up(tmp_path)
    try:
        def redis_ok():
            return (_health(up, port, log_path) or {}).get("redis") == "ok"

        wait_for(redis_ok, 60, 0.2, "the console to answer with the Redis it found")
        previous.terminate()
        previous.wait(10)
        own_pid = int(wait_for(lambda: re.search(r"started embedded Redis \(pid (\d+)\)", log_path.read_text()),
                               30, 0.1, "its own Redis to start").group(1))
        assert "embedded Redis lost its socket; starting it again" in log_path.read_text()
        wait_for(redis_ok, 30, 0.2, "the console to use its own Redis")

        os.kill(own_pid, signal.SIGKILL)
        wait_for(lambda: "embedded Redis exited; starting it again" in log_path.read_text(), 30, 0.1,
                 "the dead Redis to be noticed")
        wait_for(lambda: len(re.findall(r"started embedded Redis \(pid", log_path.read_text())) == 2, 30, 0.1,
                 "a new Redis to start")
        wait_for(redis_ok, 30, 0.2, "the console to use the new Redis")
    finally:
        os.killpg(up.pid, signal.SIGINT)
        code = up.wait(30)
        if previous.poll() is None:
            previous.terminate()
    assert code == 0, log_path.read_text()
    assert not (tmp_path / "redis.sock").exists()


def test_up_killed_with_sigkill_takes_its_children_and_the_next_one_stops_the_redis_left(tmp_path):
    up, port, log_path = _start_up(tmp_path)
    socket_path = socket_path_of(str(tmp_path))
    try:
        assert wait_for(lambda: _health(up, port, log_path), 60, 0.2, "the console to answer") == HEALTHY
        children = {int(pid) for pid in re.findall(r"started \S+ \(pid (\d+)\)", log_path.read_text())}
        assert len(children) >= 3  # web, worker-1, scheduler
        web = int(re.search(r"started web \(pid (\d+)\)", log_path.read_text()).group(1))
        web_workers = living_children(web)
        assert web_workers  # granian's worker, forked by the web process: a grandchild of `rebound up`
        children |= web_workers
        up.kill()
        up.wait(10)
        wait_for(lambda: not any(process_alive(pid) for pid in children), 30, 0.1,
                 f"the children {sorted(children)} of the killed console to end")
        # Its Redis runs in a session of its own, on purpose: the next console finds it, and stops it on Ctrl-C.
        assert redis.Redis(unix_socket_path=str(socket_path)).ping()
        up, port, log_path = _start_up(tmp_path)
        assert wait_for(lambda: _health(up, port, log_path), 60, 0.2, "the next console to answer") == HEALTHY
        os.killpg(up.pid, signal.SIGINT)
        assert up.wait(30) == 0, log_path.read_text()
        assert "stopping the embedded Redis found running at start" in log_path.read_text()
        assert not socket_path.exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(up.pid, signal.SIGKILL)
        if socket_path.exists():  # asking a socket no server listens on costs redis-py's retries, 4 s
            with contextlib.suppress(redis.ConnectionError):
                redis.Redis(unix_socket_path=str(socket_path)).shutdown(nosave=True)


def test_up_on_a_file_that_is_no_database_says_so_in_one_line_and_leaves_no_redis(tmp_path):
    (tmp_path / "rebound.db").write_bytes(b"not a database " * 400)  # a wrong file in its place, or a broken disk
    up = subprocess.run([sys.executable, "-m", "console.cli", "up"], env=_env(tmp_path, free_port()),
                        capture_output=True, text=True, timeout=60)
    assert up.returncode == 1, up.stderr
    assert up.stderr.strip().splitlines()[-1] == (
        f"Error: the database sqlite:///{tmp_path}/rebound.db cannot be read (file is not a database). Check that "
        "REBOUND_DATABASE_URL or REBOUND_DATA_DIR names Rebound's database; if it does, restore it from your backup.")
    assert "Traceback" not in up.stderr
    assert not socket_path_of(str(tmp_path)).exists()  # its embedded Redis stopped with it


def test_up_with_a_first_admin_password_too_easy_to_guess_says_so_in_one_line(tmp_path):
    """It was a traceback ending in InvalidInput (helper 128): a value that cannot work is one line naming it."""
    env = {**_env(tmp_path, free_port()), "REBOUND_ADMIN_PASSWORD": "Password2024!", "REBOUND_DEMO": "0"}
    up = subprocess.run([sys.executable, "-m", "console.cli", "up"], env=env, capture_output=True, text=True,
                        timeout=60)
    assert up.returncode == 1 and "Traceback" not in up.stderr, up.stderr
    said = up.stderr.strip().splitlines()[-1]
    assert said.startswith("Error: REBOUND_ADMIN_PASSWORD cannot be the first admin's password: the password is too "
                           "easy to guess") and said.endswith("Choose another, or leave it unset for a generated one")
    assert "Password2024!" not in up.stderr + up.stdout
    assert not socket_path_of(str(tmp_path)).exists()  # its embedded Redis stopped with it


def _health(up, port: int, log_path) -> dict | None:
    """Return the console's /healthz answer, or None while it does not answer; fail at once if `rebound up` exited."""
    assert up.poll() is None, log_path.read_text()
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).json()
    except requests.RequestException:
        return None


def _start_up(data_dir):
    """Start `rebound up` on a data dir and a free port, in its own process group; return (process, port, log)."""
    port = free_port()
    log_path = data_dir / "up.log"
    with log_path.open("w") as log:
        up = subprocess.Popen([sys.executable, "-m", "console.cli", "up"], env=_env(data_dir, port), stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    return up, port, log_path


def _env(data_dir, port: int) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith("REBOUND_")}
    return {**env, "REBOUND_DATA_DIR": str(data_dir), "REBOUND_PORT": str(port), "REBOUND_WORKERS": "1",
            "REBOUND_DEMO": "0", "PYTHONUNBUFFERED": "1"}
