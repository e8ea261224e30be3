"""Two real scheduler processes: one leads and fires; kill it, the other takes over; no double, no gap.

The smoke test of the real thing. The cases of a handover (killed after a firing, across a cron time, a stalled
leader waking up) are tests/scheduler/test_leadership.py, on the injected clock.
"""

import signal
import subprocess
from datetime import timedelta

import pytest
import redis
from sqlalchemy import update

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Run, Task
from console.services.system.leader import KEY
from tests import console_forks
from tests.helpers import env_for, wait_for

# A leader's lock lapses this long after it dies; the default (10 s) would only make the test wait longer, and a
# shorter one can lapse while a loaded machine holds back a live leader's renewal.
LEADER_TTL_S = "3"


@pytest.fixture
def schedulers(app, tmp_path):
    started = []

    def start():
        log = (tmp_path / f"scheduler-{len(started)}.log").open("w")
        process = console_forks.start(["scheduler"], {**env_for(app), "REBOUND_LEADER_TTL_S": LEADER_TTL_S},
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


def _between_5_and_35_s_past_a_minute():
    now = utcnow()
    return now if 5 <= now.second < 35 else None


def test_standby_takes_over_when_the_leader_dies_without_double_or_missed_runs(app, register, schedulers,
                                                                               redis_url):
    # The leader's first firing is the catch-up it does on winning the lock (the task "was created" half a minute
    # before the last cron time), so the test waits for one cron time, the new leader's, not two. Start between 5 s
    # and 35 s past a minute, so that exactly one cron time is due at that catch-up (a cron time less than 5 s old
    # is left to APScheduler) and, unless the start takes over 25 s, the leader is killed before the next one.
    now = wait_for(_between_5_and_35_s_past_a_minute, 40, 0.2, "a moment between 5 s and 35 s past a minute")
    last_cron_time = now.replace(second=0, microsecond=0)
    task = register(cron="* * * * *", misfire_grace_s=120)
    db.session.execute(update(Task).where(Task.id == task.id).values(created_at=last_cron_time - timedelta(seconds=30)))
    db.session.commit()

    first, second = schedulers(), schedulers()
    connection = redis.Redis.from_url(redis_url)
    holder = wait_for(lambda: connection.get(KEY), 20, 0.1, "a leader to be elected").decode()
    leader, standby = (first, second) if f":{first.pid}:" in holder else (second, first)
    times = wait_for(lambda: scheduled_times(task.id), 20, 0.1, "the leader's first firing")
    assert times == [last_cron_time]
    leader.kill()  # SIGKILL: its lock lapses after its TTL
    leader.wait()
    wait_for(lambda: f":{standby.pid}:" in (connection.get(KEY) or b"").decode(), 10, 0.1,
             "the standby to take the lock")
    later = wait_for(lambda: [t for t in scheduled_times(task.id) if t > times[-1]], 75, 0.2,
                     "a firing by the new leader")
    all_times = scheduled_times(task.id)
    assert len(all_times) == len(set(all_times))  # never twice
    gaps = {(b - a).total_seconds() for a, b in zip(all_times, all_times[1:], strict=False)}
    assert gaps <= {60.0}, all_times  # never a minute missed
    assert later
    assert db.session.get(Task, task.id).missed_total == 0
