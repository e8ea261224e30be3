"""Engine fixtures: real RQ worker processes, and helpers to submit runs and wait for their states."""

import contextlib
import os
import signal
import subprocess
import sys

import pytest
from sqlalchemy import select

from console.extensions import db
from console.models import DeadLetter, OutboxMessage, Run, RunEvent
from console.services.actor import Actor
from console.services.engine.submit import submit
from console.services.people import tenants
from tests.conftest import env_for, wait_for


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


class Runs:
    """Submit runs and look at them the way the tests need."""

    actor = Actor("test")

    def submit(self, handler: str = "demo.noop", params: dict | None = None, policy=None, tenant: str = "default",
               **kwargs) -> int:
        run, created = submit(tenants.find(tenant), self.actor, handler=handler, params=params, policy=policy,
                              **kwargs)
        assert created
        return run.id

    def get(self, run_id: int) -> Run:
        db.session.expire_all()
        return db.session.get(Run, run_id)

    def status(self, run_id: int) -> str:
        status = db.session.execute(select(Run.status).where(Run.id == run_id)).scalar_one()
        db.session.commit()
        return status

    def wait(self, run_id: int, *statuses: str, timeout_s: float = 30) -> Run:
        wait_for(lambda: self.status(run_id) in statuses, timeout_s, 0.05,
                 f"run {run_id} to become {' or '.join(statuses)} (it is {self.status(run_id)})")
        return self.get(run_id)

    def events(self, run_id: int, kind: str | None = None) -> list[RunEvent]:
        db.session.expire_all()
        query = select(RunEvent).where(RunEvent.run_id == run_id).order_by(RunEvent.id)
        if kind:
            query = query.where(RunEvent.kind == kind)
        return db.session.execute(query).scalars().all()

    def dead_letters(self, run_id: int) -> list[DeadLetter]:
        db.session.expire_all()
        return db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run_id)).scalars().all()

    def outbox(self, kind: str | None = None) -> list[OutboxMessage]:
        db.session.expire_all()
        query = select(OutboxMessage).order_by(OutboxMessage.id)
        return db.session.execute(query.where(OutboxMessage.kind == kind) if kind else query).scalars().all()


@pytest.fixture
def runs(app):
    return Runs()
