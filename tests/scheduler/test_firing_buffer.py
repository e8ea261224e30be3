"""A batch of cron firings the database refuses is tried again, not dropped: a 90-s write lock lost a minute's
firing without a trace, as the live firing after it moved the catch-up's mark past it (helper 162)."""

from datetime import timedelta

import pytest
from sqlalchemy import select

from console.extensions import db
from console.models import Run, Task
from console.scheduler.firing import FiringBuffer
from console.services.scheduling import planner


@pytest.fixture
def refusing(monkeypatch):
    """Make the planner refuse the next `times` batches, as a locked database does."""
    real_fire, left = planner.fire, []

    def fire(firings, actor, clock=None):
        if left:
            left.pop()
            raise RuntimeError("database is locked")
        return real_fire(firings, actor, clock)

    monkeypatch.setattr(planner, "fire", fire)
    return lambda times: left.extend([1] * times)


def runs_of(task_id: int) -> list:
    db.session.expire_all()
    return sorted(run.scheduled_for for run in db.session.execute(select(Run).where(Run.task_id == task_id))
                  .scalars())


def test_a_refused_batch_is_tried_again_until_the_database_takes_it(app, register, clock, refusing):
    task = register(clock=clock)
    buffer = FiringBuffer(app, clock=clock, pauses_s=(0.0,))
    refusing(2)
    minute = clock().replace(second=0, microsecond=0)
    assert buffer.flush([planner.Firing(task.id, minute)]) is False
    assert runs_of(task.id) == []
    assert buffer.flush(buffer._take()) is False  # still refused: back in the buffer again
    assert buffer.flush(buffer._take()) is True
    assert runs_of(task.id) == [minute] and buffer._items == []


def test_firings_that_waited_past_their_grace_are_coalesced_and_counted_missed(app, register, clock, refusing):
    task = register(clock=clock, misfire_grace_s=60)
    other = register("hourly", clock=clock, cron="0 * * * *", misfire_grace_s=60)
    buffer = FiringBuffer(app, clock=clock, pauses_s=(0.0,))
    first = clock().replace(second=0, microsecond=0)
    refusing(1)
    assert buffer.flush([planner.Firing(task.id, first), planner.Firing(other.id, first)]) is False
    clock.advance(90)  # the database took its time: `first` is past the 60-s grace now
    second = first + timedelta(minutes=1)
    buffer.add_many([planner.Firing(task.id, second)])
    assert buffer.flush(buffer._take()) is True
    # Once per task, as a catch-up: the latest within its grace fires, the others are counted.
    assert runs_of(task.id) == [second] and runs_of(other.id) == []
    db.session.expire_all()
    assert (db.session.get(Task, task.id).missed_total, db.session.get(Task, other.id).missed_total) == (1, 1)
