"""RQ workers that run each job inside a fresh app context of an app built once."""

import importlib
import os
import socket

from rq import SimpleWorker, Worker

from console.extensions import PINNED, db
from console.services.engine import registry

QUEUES = ["default", "retries", "maintenance"]


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


class ReboundSimpleWorker(AppContextMixin, SimpleWorker):
    """Runs jobs in the worker process itself: no fork per job, so several times faster."""


class ReboundForkWorker(AppContextMixin, SimpleWorker):
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
