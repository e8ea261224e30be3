"""Fixtures for runbooks: the test runbooks registered, people, dead runs, and a snapshot of every table."""

import pytest
import redis as redis_client
from sqlalchemy import select

from console.extensions import db
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.people import users
from console.services.recovery import runbook_registry, runbook_runner, runbooks
from tests.engine.conftest import Runs, workers  # noqa: F401 - the real-worker fixture, shared

SAMPLES = ["jobs.runbooks", "tests.recovery.sample_runbooks"]
# The execution's own bookkeeping: what a dry-run writes about itself, never about the system.
BOOKKEEPING = {"runbook_executions", "runbook_changes", "runbook_backups"}
LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}
BROKEN = {"fail_times": 9, "error": "fatal", "code": "bad_account", "message": "account 42 is closed"}


@pytest.fixture
def samples(app):
    """Register the test runbooks beside the shipped ones (workers get REBOUND_RUNBOOK_MODULES)."""
    app.config["RUNBOOK_MODULES"] = SAMPLES
    runbook_registry.init_app(app)
    yield ",".join(SAMPLES)
    app.config["RUNBOOK_MODULES"] = ["jobs.runbooks"]
    runbook_registry.init_app(app)


@pytest.fixture
def staff(app):
    """An operator, two approvers and an admin, as the actors services see."""
    made = {}
    for name, role in (("olga", "operator"), ("alex", "approver"), ("bea", "approver"), ("ada", "admin")):
        user, _ = users.create(name, role, "correct-horse-battery", Actor("test"))
        made[name] = Actor(name, user.id)
    return made


@pytest.fixture
def dead_run(app, clock):
    """Make a run of tenant `tenant` dead (a non-retryable failure) and return (run id, its dead letter id)."""
    runs = Runs()

    def make(tenant: str = "default", **params) -> tuple[int, int]:
        run_id = runs.submit("demo.flaky", {**BROKEN, **params}, policy=LENIENT, tenant=tenant)
        assert execute(run_id, 0, clock=clock) == "dead"
        (letter,) = runs.dead_letters(run_id)
        return run_id, letter.id

    return make


@pytest.fixture
def snapshot(redis_url):
    """Return every table's rows (but the executions' own bookkeeping) and Redis's keys, to compare before/after."""
    connection = redis_client.Redis.from_url(redis_url)

    def take() -> dict:
        db.session.commit()
        with db.engine.connect() as conn:
            tables = {table.name: sorted(map(repr, conn.execute(select(table)).all()))
                      for table in db.metadata.sorted_tables if table.name not in BOOKKEEPING}
        keys = sorted(connection.keys())
        return {"tables": tables, "redis": {key: connection.type(key) for key in keys}}

    return take


def run_now(name: str, params: dict, actor: Actor, *, clock, dry_run: bool = False, scope=None, tenant=None,
            reason=None):
    """File an execution and run it here, as the CLI does; return it as stored afterwards."""
    execution = runbooks.start(name, params, actor, scope=scope, tenant=tenant, dry_run=dry_run, reason=reason,
                               clock=clock, enqueue=False)
    runbook_runner.execute(execution.id, clock=clock, sleep=lambda seconds: None)
    db.session.expire_all()
    return runbooks.get(execution.id)


def changes_of(execution, planned: bool) -> list[tuple]:
    rows, _ = runbooks.changes(execution.id, planned=planned)
    return [(row.object, row.object_id, row.field, row.before, row.after) for row in rows]
