"""Quota classes with several writers: one create per name; a delete and a save naming the class never both win."""

import threading

from console.extensions import db
from console.models import QuotaClass, Task
from console.services.actor import Actor
from console.services.errors import Conflict, InvalidInput
from console.services.people import tenants
from console.services.scheduling import quota_class_deletion, quota_classes
from console.services.scheduling import tasks as task_service


def in_threads(app, *work) -> list:
    """Run each callable in its own thread and app context; return what each returned or raised."""
    results = [None] * len(work)

    def one(index: int):
        with app.app_context():
            try:
                results[index] = work[index]()
            except Exception as error:  # noqa: BLE001 - the test looks at what each writer got
                results[index] = error
            finally:
                db.session.remove()

    threads = [threading.Thread(target=one, args=(index,), name=f"writer-{index}") for index in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.session.expire_all()
    return results


def test_concurrent_creates_of_one_name_make_one_class(app):
    barrier = threading.Barrier(3)

    def create(limit: int):
        barrier.wait()
        return quota_classes.create("heavy-etl", limit, Actor("test")).max_running

    results = in_threads(app, *(lambda n=n: create(n) for n in (1, 2, 3)))
    assert sum(isinstance(r, Conflict) for r in results) == 2 and sum(isinstance(r, int) for r in results) == 1
    assert QuotaClass.query.count() == 1


def test_a_task_saved_while_its_class_is_deleted_does_not_keep_the_deleted_class(app, monkeypatch):
    quota_classes.create("heavy-etl", 2, Actor("test"))
    checked, task_read = threading.Event(), threading.Event()
    users, find = quota_class_deletion.users, quota_classes.find

    def users_then_hold(name):
        found = users(name)
        checked.set()
        # Hold the uncommitted delete until the task save has checked the class exists, or for a second: with the
        # lock the task save waits for this commit, so it never checks meanwhile.
        task_read.wait(1.0)
        return found

    def find_noting_the_task_read(name):
        record = find(name)
        if threading.current_thread().name == "writer-1":
            task_read.set()
        return record

    monkeypatch.setattr(quota_class_deletion, "users", users_then_hold)
    monkeypatch.setattr(quota_classes, "find", find_noting_the_task_read)

    def register():
        checked.wait(10)
        return task_service.register(tenants.find("default"), {"name": "export", "handler": "demo.noop",
                                                               "template": None, "quota_class": "heavy-etl"},
                                     Actor("test")).id

    results = in_threads(app, lambda: quota_class_deletion.delete("heavy-etl", Actor("test")), register)
    # Without the lock the task save read the class before the delete's commit and kept its name: a dangling class.
    assert results[0] is None and isinstance(results[1], InvalidInput), results
    assert Task.query.filter_by(quota_class="heavy-etl").count() == 0
