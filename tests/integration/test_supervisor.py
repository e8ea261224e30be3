"""The supervisor's stop: nothing restarted on Ctrl-C, a grace period for running jobs, a second Ctrl-C ends it."""

import contextlib
import os
import signal
import subprocess
import sys
import time

from tests.helpers import ROOT, process_alive, wait_for

# A child that finishes its "job" before stopping: it ignores SIGTERM and exits only when Ctrl-C reaches it.
PATIENT_CHILD = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); " \
                "time.sleep(120)"
SUPERVISOR = """
import logging, sys
from console.processes.supervisor import Child, Supervisor
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
Supervisor([Child(f"child-{n}", [sys.executable, "-c", sys.argv[1]]) for n in (1, 2)], poll_s=0.2).run()
"""


def _start(tmp_path, child: str = PATIENT_CHILD):
    log_path = tmp_path / "supervisor.log"
    with log_path.open("w") as log:
        process = subprocess.Popen([sys.executable, "-c", SUPERVISOR, child], cwd=ROOT, stdout=log,
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


# A child stuck on SIGTERM that forks twice: one grandchild that inherits the stack dump, one that execs a
# program which never asked for it (SIGUSR2 would kill it).
STUCK_CHILD = """
import os, signal, subprocess, sys, time
from console.processes import stacks
signal.signal(signal.SIGTERM, signal.SIG_IGN)
stacks.dump_on_signal()
def grandchild_waits_too():
    time.sleep(120)
def stuck_in_its_teardown():
    time.sleep(120)
if os.fork() == 0:
    grandchild_waits_too()
bystander = subprocess.Popen(["sleep", "120"])
print("up", bystander.pid, flush=True)
stuck_in_its_teardown()
"""
IMPATIENT_SUPERVISOR = """
import logging, sys
from console.processes.supervisor import Child, Supervisor
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
Supervisor([Child("stuck", [sys.executable, "-c", sys.argv[1]])], poll_s=0.2, stop_timeout_s=1).run()
"""


def test_a_child_that_does_not_stop_has_its_stacks_written_before_it_is_killed(tmp_path):
    log_path = tmp_path / "supervisor.log"
    with log_path.open("w") as log:
        supervisor = subprocess.Popen([sys.executable, "-c", IMPATIENT_SUPERVISOR, STUCK_CHILD], cwd=ROOT,
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                      env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    try:
        wait_for(lambda: "up " in log_path.read_text(), 30, 0.05, "the child to start")
        bystander = int(log_path.read_text().split("up ")[1].split()[0])
        supervisor.send_signal(signal.SIGINT)

        assert supervisor.wait(30) == 0, log_path.read_text()
        output = log_path.read_text()
        assert "stuck did not stop within 1 s; killing it (the stacks of pids " in output
        assert output.count("stuck_in_its_teardown") == 1, output
        assert output.count("grandchild_waits_too") == 1, output
        # Still running: a process that did not ask for a dump is not sent the signal (it would have killed it).
        assert process_alive(bystander)
    finally:
        os.killpg(supervisor.pid, signal.SIGKILL)


# A child that writes its stacks on SIGUSR2, as web, worker and scheduler do, waiting in a function of its own.
DUMPING_CHILD = """
import time
from console.processes import stacks
stacks.dump_on_signal()
def serving_requests():
    time.sleep(120)
print("up", flush=True)
serving_requests()
"""


def test_sigusr2_to_the_supervisor_writes_every_processs_stacks_and_stops_nothing(tmp_path):
    """`kill -USR2` on rebound up's pid, the one a person has, ended the whole console (helper 118)."""
    supervisor, log_path = _start(tmp_path, DUMPING_CHILD)
    try:
        supervisor.send_signal(signal.SIGUSR2)
        wait_for(lambda: log_path.read_text().count("serving_requests") == 2, 30, 0.05, "both children's stacks")
        assert "in run" in log_path.read_text()  # the supervisor's own: its loop in Supervisor.run
        assert supervisor.poll() is None and "restarting" not in log_path.read_text()
        supervisor.send_signal(signal.SIGINT)
        assert supervisor.wait(30) == 0, log_path.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):  # stopped already, as it should have
            os.killpg(supervisor.pid, signal.SIGKILL)


def test_burst_workers_in_several_processes_drain_the_queues_and_exit(app, runs):
    """`worker --burst --processes 2` restarted each drained child (exit 0) for ever (helper 121)."""
    from tests.helpers import env_for

    run_id = runs.submit("demo.noop")
    done = subprocess.run([sys.executable, "-m", "console.cli", "worker", "--burst", "--processes", "2"],
                          cwd=ROOT, env={**env_for(app), "REBOUND_LOG_LEVEL": "INFO"}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "restarting" not in done.stderr and done.stderr.count("finished its work") == 2
    assert runs.status(run_id) == "succeeded"
