"""RQ workers that run each job inside a fresh app context of an app built once."""

import importlib
import os
import socket
import time

from rq import SimpleWorker, Worker

from console.extensions import PINNED, db
from console.services.engine import registry
from console.services.engine.queueing import QUEUES


class AppContextMixin:
    """Give each job its own app context and database session on one connection, then clean them up."""

    flask_app = None

    def perform_job(self, *args, **kwargs):
        with self.flask_app.app_context(), db.engine.connect() as connection:
            session = db.session()
            # A job's session lives for one job; reloading every object after each commit only costs queries.
            session.expire_on_commit = False
            session.info[PINNED] = connection
            try:
                return super().perform_job(*args, **kwargs)
            finally:
                db.session.remove()


class SparseHousekeepingMixin:
    """Do RQ's per-job housekeeping in Redis at most once a second: renewing the worker key, checking suspension."""

    EVERY_S = 1.0
    clock = staticmethod(time.monotonic)
    _last_beat = _last_suspension_check = float("-inf")

    def heartbeat(self, timeout=None, pipeline=None):
        # RQ beats before and after each dequeue and after each job, 3 round trips each: ~0.8 ms of a bare no-op
        # job's ~4 ms here. The key lives worker_ttl + 60 s, so a beat a second keeps it as alive as nine per job did.
        # Beats with a timeout or on a pipeline (RQ's job monitoring) always go through.
        if timeout is None and pipeline is None:
            beat_at = self.clock()
            if beat_at - self._last_beat < self.EVERY_S:
                return
            self._last_beat = beat_at
        super().heartbeat(timeout, pipeline)

    def check_for_suspension(self, burst: bool):
        # `rq suspend` then takes effect within a second rather than before the very next job.
        checked_at = self.clock()
        if checked_at - self._last_suspension_check < self.EVERY_S:
            return
        self._last_suspension_check = checked_at
        super().check_for_suspension(burst)

    @property
    def dequeue_timeout(self) -> int:
        # A job's preparation cuts the key's life to ~90 s (RQ's job monitoring), and the beat skipped just before
        # an idle wait cannot restore it: so an idle worker wakes to beat every minute rather than every 405 s.
        return min(super().dequeue_timeout, 60)


class ReboundSimpleWorker(AppContextMixin, SparseHousekeepingMixin, SimpleWorker):
    """Runs jobs in the worker process itself: no fork per job, so several times faster."""


class ReboundForkWorker(AppContextMixin, SparseHousekeepingMixin, SimpleWorker):
    """Forks a child per handler call: a crashing, leaking or hung handler cannot take the worker down.

    Unlike RQ's forking Worker, which forks for the whole job, only the handler runs in the child: the claim
    and the outcome are written by the worker on its warm connection (see engine/isolation.py).
    """


WORKER_CLASSES = {"simple": ReboundSimpleWorker, "fork": ReboundForkWorker}


def worker_name() -> str:
    """Return a name that tells the host and process apart."""
    return f"{socket.gethostname()}.{os.getpid()}"


def build_worker(app, connection, kind: str = "simple", queues: list[str] | None = None) -> Worker:
    """Create a worker of the given kind bound to the app."""
    # Import the job and handler modules once here, not in every forked child.
    importlib.import_module("jobs.execute")
    registry.names()
    cls = WORKER_CLASSES[kind]
    app.config["ISOLATE_HANDLERS"] = kind == "fork"
    worker = cls(queues or QUEUES, connection=connection, name=worker_name())
    worker.flask_app = app
    return worker
