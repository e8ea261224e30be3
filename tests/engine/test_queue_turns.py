"""The worker's queues take turns: a due retry does not wait behind a backlog of new runs (helper 170: p50 5 min
behind 7,000 queued runs, as workers read the run queue first and the retries only when it was empty).

One real worker on a real Redis, started after the backlog and the retry are queued.
"""

from console.services.engine import queueing
from console.services.engine.execute import execute

FLAKY_ONCE = {"fail_times": 1}
AN_HOUR_LATER = {"max_attempts": 2, "base_delay_s": 3600, "max_delay_s": 3600, "jitter": 0}


def test_a_due_retry_goes_before_a_backlog_of_new_runs_drains(runs, workers):
    retried = runs.submit("demo.flaky", FLAKY_ONCE, policy=AN_HOUR_LATER)
    assert execute(retried, 0) == "retry_wait"
    backlog = [runs.submit("demo.sleep", {"seconds": 0.2}) for _ in range(30)]
    queueing.enqueue_now(retried, 1, 1, 60, queue=queueing.RETRY_QUEUE)  # due now, as the reconciler queues one
    workers()
    runs.wait(retried, "succeeded", timeout_s=30)
    done = sum(runs.status(run_id) == "succeeded" for run_id in backlog)
    assert done < 5, f"{done} of the 30 new runs went before the due retry"
