"""Real processes the tests run against: a `rebound web` over a copy of the migrated database, an app beside it."""

import contextlib
import os
from pathlib import Path

from console import create_app
from console.extensions import db
from console.processes.ready import wait_until_ready
from console.services.system import bootstrap
from tests import console_forks
from tests.helpers import AUDIT_KEY, PASSWORD, free_port


@contextlib.contextmanager
def web_server(data_dir: Path, redis_url: str, migrated_template: str, databases, **settings: str):
    """Run a real `rebound web` process on a free port, over a copy of the migrated database with an admin
    (`settings`: more of its environment, REBOUND_… variables)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with databases.copy(migrated_template, data_dir) as database_url:
        env = {**os.environ, "REBOUND_DATA_DIR": str(data_dir), "REBOUND_REDIS_URL": redis_url,
               "REBOUND_DATABASE_URL": database_url, "REBOUND_ADMIN_PASSWORD": PASSWORD,
               "REBOUND_SECRET_KEY": "live-" + data_dir.name, "REBOUND_AUDIT_KEY": AUDIT_KEY,
               "REBOUND_PORT": str(free_port()),
               "REBOUND_LOG_LEVEL": "WARNING", **settings}
        log = (data_dir / "web.log").open("w")
        process = console_forks.start(["web", "--threads", "4"], env, stdout=log, stderr=log)

        url = f"http://127.0.0.1:{env['REBOUND_PORT']}"
        try:
            try:  # 20 s was passed at load 12
                wait_until_ready(url, 60, alive=lambda: process.poll() is None)
            except RuntimeError as error:
                raise AssertionError(f"{error}\n{(data_dir / 'web.log').read_text()}") from None
            yield type("Server", (), {"url": url, "env": env, "data_dir": data_dir})
        finally:  # also when the caller fails inside the with: an orphaned server would outlive the tests
            process.terminate()  # graceful; quick once the browser's connections are closed (tests/browser/conftest.py)
            process.wait(15)
            log.close()



@contextlib.contextmanager
def app_beside(server):
    """An app in the test process on a live server's database and Redis, to arrange data through services."""
    env = server.env
    app = create_app({"TESTING": True, "DATA_DIR": env["REBOUND_DATA_DIR"], "REDIS_URL": env["REBOUND_REDIS_URL"],
                      "SQLALCHEMY_DATABASE_URI": env["REBOUND_DATABASE_URL"],
                      "SECRET_KEY": env["REBOUND_SECRET_KEY"], "AUDIT_KEY": AUDIT_KEY})
    with app.app_context():
        bootstrap.ensure_ready()
        yield app
        db.session.remove()
        db.engine.dispose()
