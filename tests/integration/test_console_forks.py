"""A start forked from the launcher (tests/console_forks.py) is what `python -m` would have started."""

import json
import os
import signal
import subprocess

import pytest

from tests import console_forks
from tests.helpers import wait_for

pytestmark = pytest.mark.once  # no database

PROBE = '''
import json, os, signal, sys, threading
import console.cli
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path": sys.path[:2], "setting": os.environ.get("PROBE"),
                  "sid": os.getsid(0) == os.getpid(), "name": __name__, "threads": threading.active_count(),
                  "stdin": sys.stdin.read(), "cli_imported": "console.cli" in sys.modules,
                  "ctrl_c": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
                  "big": len(os.environ.get("BIG", ""))}), flush=True)
print("to stderr", file=sys.stderr, flush=True)
if "--wait" in sys.argv:
    signal.pause()
sys.exit(int(sys.argv[1]))
'''


@pytest.fixture
def probe(tmp_path):
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "fork_probe.py").write_text(PROBE)
    (tmp_path / "elsewhere").mkdir()
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'modules'}", "PROBE": "given"}
    return tmp_path, env


def test_a_forked_start_takes_the_argv_environment_directory_path_stdio_and_session_it_was_given(probe):
    tmp_path, env = probe
    log = (tmp_path / "out.log").open("w")
    big = "x" * 600_000  # past a socket's buffer: the request arrives in several reads
    started = console_forks.start(["3"], {**env, "BIG": big}, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True, cwd=tmp_path / "elsewhere", module="fork_probe")
    assert isinstance(started, console_forks.ForkedProcess)
    assert started.wait(30) == 3 and started.poll() == 3
    said, err = (tmp_path / "out.log").read_text().splitlines()
    assert err == "to stderr"
    assert json.loads(said) == {"argv": [str(tmp_path / "modules" / "fork_probe.py"), "3"],
                                "cwd": str(tmp_path / "elsewhere"),
                                "path": [str(tmp_path / "elsewhere"), str(tmp_path / "modules")],
                                "setting": "given", "sid": True, "name": "__main__", "threads": 1, "stdin": "",
                                "cli_imported": True, "ctrl_c": True, "big": len(big)}


def test_a_forked_start_is_waited_for_and_signalled_as_popen_is(probe):
    tmp_path, env = probe
    log = (tmp_path / "out.log").open("w")
    started = console_forks.start(["0", "--wait"], env, stdout=log, stderr=log, module="fork_probe")
    try:
        wait_for(lambda: "to stderr" in (tmp_path / "out.log").read_text(), 30, 0.05, "the probe to start")
        assert started.poll() is None
        assert os.getpgid(started.pid) == os.getpgid(0)  # a Ctrl-C on the tests reaches it, as it reached Popen's
        with pytest.raises(subprocess.TimeoutExpired):
            started.wait(0.2)
        started.terminate()
        assert started.wait(10) == -signal.SIGTERM
        started.kill()  # as Popen: a signal to a process already reaped is not sent
    finally:  # a failed check above must not leave the probe waiting for ever
        if started.returncode is None:
            started.kill()
            started.wait(10)


def test_a_start_that_changes_how_python_starts_is_a_real_one(probe):
    tmp_path, env = probe
    started = console_forks.start(["0"], {**env, "PYTHONINTMAXSTRDIGITS": "5000"}, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, module="fork_probe")
    assert isinstance(started, subprocess.Popen) and started.wait(30) == 0
