"""A batch submitted in one call is run by real workers: every run once, none left behind."""

from sqlalchemy import func, select

from console.extensions import db
from console.models import Run, RunEvent
from console.services.actor import Actor
from console.services.engine.batch_submit import submit_batch
from console.services.people import tenants
from tests.helpers import wait_for


def test_a_real_worker_drains_a_batch_running_each_run_once(app, workers):
    tenant = tenants.find("default")
    answers = submit_batch([{"handler": "demo.noop", "params": {"i": i}} for i in range(200)]
                           + [{"handler": "demo.noop", "idempotency_key": "twice"}] * 2, Actor("test"),
                           lambda name, task_id: tenant)
    ids = {answer["id"] for answer in answers}
    assert len(ids) == 201
    workers()

    def succeeded() -> int:
        count = db.session.execute(select(func.count()).select_from(Run).where(Run.status == "succeeded")).scalar()
        db.session.commit()
        return count

    wait_for(lambda: succeeded() == 201, 60, 0.2, "the batch's 201 runs to succeed")
    starts = db.session.execute(select(RunEvent.run_id, func.count()).where(RunEvent.kind == "running")
                                .group_by(RunEvent.run_id)).all()
    assert {run_id for run_id, _ in starts} == ids
    assert all(count == 1 for _, count in starts)
