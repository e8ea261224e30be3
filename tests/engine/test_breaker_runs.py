"""A breaker names the runs behind its state: the failure that opened it, and its half-open probe (helper 164).

Real RQ workers on a real Redis; the breaker opens for one second, so its probe comes due without moving a clock.
"""

from console.domain.breaker import BreakerMode
from console.domain.clock import utcnow
from console.services.engine import breakers
from console.services.engine.breakers import BreakerKey
from tests.helpers import wait_for

HANDLER = "python:demo.flaky"
FAILING = {"fail_times": 9, "message": "upstream 503"}
POLICY = {"max_attempts": 1, "breaker": {"failure_threshold": 2, "open_s": 1, "success_threshold": 1}}


def test_the_breaker_names_the_failure_that_opened_it_and_the_probe_that_opened_it_again(runs, workers):
    workers()
    key = BreakerKey(HANDLER)
    tipping = [runs.submit("demo.flaky", FAILING, policy=POLICY) for _ in range(2)]
    for run_id in tipping:
        runs.wait(run_id, "dead")
    wait_for(lambda: breakers.state_of(key, utcnow()).opened_by_run is not None, 15, what="the breaker to open")
    opened = breakers.state_of(key, utcnow())
    assert opened.opened_by_run in tipping and not opened.reopened_by_probe

    probe = runs.submit("demo.flaky", FAILING, policy=POLICY)  # goes once the second is up, as the probe, and fails
    assert runs.wait(probe, "dead").executions == 1
    wait_for(lambda: breakers.state_of(key, utcnow()).opened_by_run == probe, 15, what="the probe to open it again")
    again = breakers.state_of(key, utcnow())
    assert again.reopened_by_probe and again.state in (BreakerMode.OPEN, BreakerMode.HALF_OPEN)
    assert again.probe_run is None  # the slot went with the probe's failure
