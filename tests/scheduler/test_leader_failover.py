"""Two real scheduler processes: one leads and fires; kill it, the other takes over; no double, no gap."""

import signal
import subprocess
import sys

import pytest
import redis

from console.extensions import db
from console.models import Run
from console.services.system.leader import KEY
from tests.helpers import env_for, wait_for


@pytest.fixture
def schedulers(app, tmp_path):
    started = []

    def start():
        log = (tmp_path / f"scheduler-{len(started)}.log").open("w")
        process = subprocess.Popen([sys.executable, "-m", "console.cli", "scheduler"], env=env_for(app),
                                   stdout=log, stderr=subprocess.STDOUT)
        started.append((process, log))
        return process

    yield start
    for process, log in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(15)
        log.close()


def scheduled_times(task_id):
    db.session.commit()
    return [r.scheduled_for for r in db.session.query(Run).filter_by(task_id=task_id).order_by(Run.scheduled_for)]


def test_standby_takes_over_when_the_leader_dies_without_double_or_missed_runs(app, register, schedulers,
                                                                               redis_url):
    task = register(cron="* * * * *")
    first, second = schedulers(), schedulers()
    connection = redis.Redis.from_url(redis_url)
    holder = wait_for(lambda: connection.get(KEY), 20, 0.1, "a leader to be elected").decode()
    leader, standby = (first, second) if f":{first.pid}:" in holder else (second, first)
    times = wait_for(lambda: scheduled_times(task.id), 75, 0.5, "the leader's first firing")
    leader.kill()  # SIGKILL: its lock lapses after its TTL (10 s)
    leader.wait()
    wait_for(lambda: f":{standby.pid}:" in (connection.get(KEY) or b"").decode(), 20, 0.2,
             "the standby to take the lock")
    later = wait_for(lambda: [t for t in scheduled_times(task.id) if t > times[-1]], 75, 0.5,
                     "a firing by the new leader")
    all_times = scheduled_times(task.id)
    assert len(all_times) == len(set(all_times))  # never twice
    gaps = {(b - a).total_seconds() for a, b in zip(all_times, all_times[1:], strict=False)}
    assert gaps <= {60.0}, all_times  # never a minute missed
    assert later
