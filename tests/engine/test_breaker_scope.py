"""Breaker scope (issue 21): per handler, one tenant's outage holds every tenant; per handler and tenant, only its own.

Real RQ workers on a real Redis; the breaker's clock is the workers' own, so nothing here moves time.
"""

import pytest

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Tenant
from console.services.delivery import notice
from console.services.engine import breakers
from console.services.engine.breakers import BreakerKey
from tests.helpers import wait_for

HANDLER = "python:demo.flaky"
FAILING = {"fail_times": 9, "message": "upstream 503"}
HEALTHY = {"fail_times": 0}


def policy(scope: str) -> dict:
    # One attempt each, so the failing runs go dead at once; two failures open the breaker for a minute.
    return {"max_attempts": 1, "breaker": {"failure_threshold": 2, "open_s": 60, "success_threshold": 1,
                                           "scope": scope}}


@pytest.fixture
def globex(app):
    tenant = Tenant(name="globex")
    db.session.add(tenant)
    db.session.commit()
    return tenant.id


def open_by_acme(runs, scope: str) -> BreakerKey:
    """Let two of the default tenant's runs fail until the breaker they count against is open; return its key."""
    acme = db.session.execute(db.select(Tenant.id).where(Tenant.name == "default")).scalar_one()
    key = BreakerKey(HANDLER, acme if scope == "handler_and_tenant" else None)
    for run_id in [runs.submit("demo.flaky", FAILING, policy=policy(scope)) for _ in range(2)]:
        runs.wait(run_id, "dead")
    # The breaker counts the outcome after the run's status is committed: wait for it, not for the runs.
    wait_for(lambda: breakers.state_of(key, utcnow()).state == "open", 15, what=f"the breaker {key} to open")
    return key


def held(runs, run_id: int) -> bool:
    run = runs.wait(run_id, "retry_wait", "succeeded")
    return (run.status, run.status_reason, run.attempt) == ("retry_wait", "breaker_open", 0)


def test_per_tenant_breaker_holds_only_the_failing_tenants_runs(runs, workers, globex):
    workers()
    key = open_by_acme(runs, "handler_and_tenant")
    others = runs.submit("demo.flaky", HEALTHY, policy=policy("handler_and_tenant"), tenant="globex")
    assert runs.wait(others, "succeeded").attempt == 1  # globex's calls of the same handler go on
    own = runs.submit("demo.flaky", HEALTHY, policy=policy("handler_and_tenant"))
    assert held(runs, own)  # the failing tenant's next run waits behind its own breaker, no attempt spent
    assert set(breakers.all_states(utcnow())) == {key}  # no handler-wide state, nothing for globex
    [alert] = [m for m in runs.outbox("alert") if m.payload["rule"] == "breaker_opened"]
    assert (alert.dedup_key, alert.tenant_id) == (f"breaker:{HANDLER}@tenant:{key.tenant_id}", key.tenant_id)
    words = notice.build(alert)
    assert words.title == f"Circuit breaker opened: {HANDLER} for default"
    assert "other tenants' calls go on" in words.summary and words.tenant == "default"


def test_handler_wide_breaker_holds_every_tenants_runs_and_its_alert_names_no_tenant(runs, workers, globex):
    workers()
    key = open_by_acme(runs, "handler")
    others = runs.submit("demo.flaky", HEALTHY, policy=policy("handler"), tenant="globex")
    own = runs.submit("demo.flaky", HEALTHY, policy=policy("handler"))
    assert held(runs, others) and held(runs, own)  # an outage is everyone's
    assert set(breakers.all_states(utcnow())) == {key}
    [alert] = [m for m in runs.outbox("alert") if m.payload["rule"] == "breaker_opened"]
    assert (alert.dedup_key, alert.tenant_id, alert.payload["tenant_id"]) == (f"breaker:{HANDLER}", None, None)
    words = notice.build(alert)
    assert words.title == f"Circuit breaker opened: {HANDLER}" and words.tenant is None
    assert "for every tenant" in words.summary and ("Tenant", "default") not in words.facts
