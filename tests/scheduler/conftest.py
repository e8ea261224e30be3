"""Scheduler fixtures: registered tasks and the engine helpers."""

import pytest

from console.services.actor import Actor
from console.services.people import tenants
from console.services.scheduling import tasks as task_service
from tests.engine.conftest import Runs, workers  # noqa: F401 - shared fixtures


@pytest.fixture
def runs(app):
    return Runs()


@pytest.fixture
def register(app):
    """Register a task in a tenant (default 'default') with sensible defaults."""

    def make(name: str = "nightly", tenant: str = "default", **fields):
        data = {"name": name, "handler": "demo.noop", "cron": "* * * * *", **fields}
        return task_service.register(tenants.find(tenant), data, Actor("test"))

    return make
