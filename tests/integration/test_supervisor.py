"""The supervisor's stop: nothing restarted on Ctrl-C, a grace period for running jobs, a second Ctrl-C ends it."""

import os
import signal
import subprocess
import sys
import time

from tests.helpers import ROOT, wait_for

# A child that finishes its "job" before stopping: it ignores SIGTERM and exits only when Ctrl-C reaches it.
PATIENT_CHILD = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); " \
                "time.sleep(120)"
SUPERVISOR = """
import logging, sys
from console.processes.supervisor import Child, Supervisor
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
Supervisor([Child(f"child-{n}", [sys.executable, "-c", sys.argv[1]]) for n in (1, 2)], poll_s=0.2).run()
"""


def _start(tmp_path):
    log_path = tmp_path / "supervisor.log"
    with log_path.open("w") as log:
        process = subprocess.Popen([sys.executable, "-c", SUPERVISOR, PATIENT_CHILD], cwd=ROOT, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    wait_for(lambda: log_path.read_text().count("up\n") == 2, 30, 0.05, "both children to start")
    return process, log_path


def test_ctrl_c_reaching_the_children_stops_them_without_a_restart(tmp_path):
    supervisor, log_path = _start(tmp_path)
    os.killpg(supervisor.pid, signal.SIGINT)  # a terminal's Ctrl-C: every process of the group

    assert supervisor.wait(30) == 0, log_path.read_text()
    output = log_path.read_text()
    assert "restarting" not in output
    assert "killing" not in output
    assert "all processes stopped" in output


def test_a_second_ctrl_c_kills_children_still_finishing_their_jobs(tmp_path):
    supervisor, log_path = _start(tmp_path)
    supervisor.send_signal(signal.SIGINT)  # only the supervisor: the children ignore its SIGTERM
    wait_for(lambda: "running jobs get up to 15 s to finish (Ctrl-C again stops them now)" in log_path.read_text(),
             30, 0.05, "the stop to be announced")
    asked_again = time.monotonic()
    supervisor.send_signal(signal.SIGINT)

    assert supervisor.wait(30) == 0, log_path.read_text()
    assert time.monotonic() - asked_again < 10  # not the 15 s grace period
    output = log_path.read_text()
    assert "child-1 did not stop before the second Ctrl-C; killing it" in output
    assert "child-2 did not stop before the second Ctrl-C; killing it" in output
    assert "restarting" not in output
