"""The handler's timeout alarm gives back RQ's job alarm, which guards the bookkeeping after the handler."""

import signal
import time

import pytest
from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty

from console.services.engine.calling import _inner_alarm


def test_rqs_alarm_and_its_handler_are_back_after_the_handler_returns():
    with UnixSignalDeathPenalty(100, JobTimeoutException):  # what RQ's worker sets around the job
        rqs_handler = signal.getsignal(signal.SIGALRM)
        with _inner_alarm(5):
            pass
        assert signal.getsignal(signal.SIGALRM) == rqs_handler
        left = signal.alarm(0)
        signal.alarm(left)
        assert 98 <= left <= 100


def test_a_handler_past_its_timeout_is_stopped_and_rqs_alarm_still_fires_after():
    stopped_at = []
    with pytest.raises(JobTimeoutException), UnixSignalDeathPenalty(2, JobTimeoutException):
        started = time.monotonic()
        with pytest.raises(JobTimeoutException), _inner_alarm(1):
            time.sleep(10)
        stopped_at.append(time.monotonic() - started)
        time.sleep(10)  # stuck bookkeeping: RQ's penalty must still stop it
    assert 0.9 < stopped_at[0] < 2.5
