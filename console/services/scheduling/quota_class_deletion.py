"""Deleting a quota class: refused while a live task or a template names it.

Apart from quota_classes.py because it reads the templates, and templates check their rules against the classes.
"""

from sqlalchemy import delete as sql_delete
from sqlalchemy import select, update

from console.db import locks
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import ConflictTemplate, QuotaClass, Task
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict
from console.services.scheduling import quota_classes, templates

SHOWN_NAMES = 10


def users(name: str) -> tuple[list[Task], list[ConflictTemplate]]:
    """Return the live tasks and the templates (rules in force) that name the class."""
    tasks = db.session.execute(select(Task).where(Task.quota_class == name, Task.deleted_at.is_(None))
                               .order_by(Task.tenant_id, Task.name)).scalars().all()
    named_by = [record for record in templates.all_templates()
                if templates.rules_of(record).get("quota_class") == name]
    return tasks, named_by


def delete(name: str, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> None:
    """Delete a class no live task or template names; one in use is a 409 naming them."""
    quota_classes.get(name)  # a 404 before taking a lock by a name that cannot exist
    # Task and template saves naming the class hold this lock: none can start using it during the check.
    locks.hold(f"quota_class:{name}")
    record = quota_classes.get(name)
    tasks, named_by = users(name)
    if tasks or named_by:
        db.session.rollback()
        shown = [f"task {task.tenant.name}/{task.name}" for task in tasks[:SHOWN_NAMES]]
        shown += [f"template {template.name}" for template in named_by[:SHOWN_NAMES]]
        more = len(tasks) + len(named_by) - len(shown)
        raise Conflict(f"quota class {name!r} is used by {', '.join(shown)}"
                       f"{f' and {more} more' if more else ''}; point them at another class (or none) first", "name")
    before = {"max_running": record.max_running, "description": record.description}
    # Deleted tasks keep their other rules; a class of the same name created later must not take them in.
    db.session.execute(update(Task).where(Task.quota_class == name).values(quota_class=None)
                       .execution_options(synchronize_session=False))
    db.session.execute(sql_delete(QuotaClass).where(QuotaClass.id == record.id))
    audit.record(db.session, actor, "quota_class.delete", "quota_class", name, before=before, clock=clock)
    db.session.commit()
