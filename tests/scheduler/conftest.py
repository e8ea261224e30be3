"""Scheduler fixtures: registered tasks."""

import pytest

from console.domain.clock import SYSTEM_CLOCK
from console.services.actor import Actor
from console.services.people import tenants
from console.services.scheduling import tasks as task_service


@pytest.fixture
def register(app):
    """Register a task in a tenant (default 'default') with sensible defaults."""

    def make(name: str = "nightly", tenant: str = "default", clock=SYSTEM_CLOCK, **fields):
        data = {"name": name, "handler": "demo.noop", "cron": "* * * * *", **fields}
        return task_service.register(tenants.find(tenant), data, Actor("test"), clock)

    return make
