"""Browser fixtures."""

import subprocess

import pytest
from sqlalchemy import select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Run
from console.services.engine import transitions
from tests import console_forks


@pytest.fixture
def page(live_server, page):
    """Playwright's page, opened after the live server and so closed before it stops.

    Gunicorn, the server before granian, took 2.3 s more to stop with the browser's keep-alive connections open;
    granian does not wait for idle connections (tests/integration/test_webserver.py), and closing first costs nothing.
    """
    return page


@pytest.fixture
def two_workers(live_server, live_app):
    """`rebound worker --processes 2` beside the live server: one runs a long holder while the other checks the next.

    At the end the runs still running are cancelled first: a worker's graceful stop waits for its run, and a
    20-second holder made the stop most of the test's time.
    """
    log = (live_server.data_dir / "workers.log").open("w")
    process = console_forks.start(["worker", "--processes", "2"], live_server.env, stdout=log,
                                  stderr=subprocess.STDOUT)
    yield process
    db.session.rollback()
    for run in db.session.execute(select(Run).where(Run.status == "running")).scalars():
        transitions.request_cancel(run, utcnow(), actor="test teardown")
    db.session.commit()
    process.terminate()
    process.wait(30)
    log.close()
