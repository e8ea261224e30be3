"""Quota classes: named limits on how many runs of their tasks run at once, across tasks and tenants."""

from sqlalchemy import func, select, update

from console.db import locks
from console.db.upsert import insert_for
from console.domain import names
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import QuotaClass, Run, Task
from console.services import inputs
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict, InvalidInput, NotFound

MAX_RUNNING = 10_000


def _max_running(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RUNNING:
        raise InvalidInput(f"max_running is a whole number from 1 to {MAX_RUNNING}", "max_running")
    return value


def _description(value) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 255:
        raise InvalidInput("description is text of at most 255 characters", "description")
    return value.strip()


def find(name) -> QuotaClass | None:
    """Return the named class, if any (read afresh)."""
    if not names.is_name(name):
        return None  # no such name can exist
    return db.session.execute(select(QuotaClass).where(QuotaClass.name == name)
                              .execution_options(populate_existing=True)).scalar_one_or_none()


def get(name: str) -> QuotaClass:
    """Return the named class or raise NotFound."""
    record = find(name)
    if record is None:
        raise NotFound(f"no quota class named {name!r}")
    return record


def hold(name: str | None, field: str = "quota_class") -> None:
    """For a save that references a class: hold its lock (so it cannot be deleted before the commit); it must exist."""
    if name is None:
        return
    locks.hold(f"quota_class:{name}")
    require_existing(name, field)


def require_existing(name: str | None, field: str = "quota_class") -> None:
    """Raise a 422 naming the field unless the class exists (None names no class)."""
    if name is not None and find(name) is None:
        raise InvalidInput(f"no quota class named {name!r}; create it under Tasks → Quota classes first", field)


def all_classes() -> list[QuotaClass]:
    """Return every class, by name."""
    return db.session.execute(select(QuotaClass).order_by(QuotaClass.name)).scalars().all()


def create(name, max_running, actor: Actor, *, description=None, clock: Clock = SYSTEM_CLOCK) -> QuotaClass:
    """Create a class; a name taken already (even by a concurrent create) is a 409."""
    values = {"name": inputs.name(name, "quota class"), "max_running": _max_running(max_running),
              "description": _description(description)}
    now = clock()
    connection = db.session.connection()
    created = connection.execute(insert_for(connection)(QuotaClass.__table__)
                                 .values(**values, created_at=now, updated_at=now)
                                 .on_conflict_do_nothing(index_elements=["name"])
                                 .returning(QuotaClass.__table__.c.id)).scalar_one_or_none()
    if created is None:
        db.session.rollback()
        raise Conflict(f"a quota class named {name!r} exists already; edit it instead", "name")
    audit.record(db.session, actor, "quota_class.create", "quota_class", name, after=values, clock=clock)
    db.session.commit()
    return get(name)


def change(name: str, actor: Actor, *, max_running=None, description=None,
           clock: Clock = SYSTEM_CLOCK) -> QuotaClass:
    """Change a class's limit and/or description (the name is its address); audited with before and after."""
    record = locks.fresh_row(QuotaClass, get(name).id)
    after = {}
    if max_running is not None:
        after["max_running"] = _max_running(max_running)
    if description is not None:
        after["description"] = _description(description)
    before = {key: getattr(record, key) for key in after}
    if before == after:
        return record
    # One statement: a concurrent edit of the other field is not overwritten with what this one read.
    db.session.execute(update(QuotaClass).where(QuotaClass.id == record.id).values(**after, updated_at=clock())
                       .execution_options(synchronize_session=False))
    audit.record(db.session, actor, "quota_class.update", "quota_class", name, before=before, after=after,
                 clock=clock)
    db.session.commit()
    return get(name)


def counts(scope: int | None) -> tuple[dict[str, int], dict[str, int]]:
    """Return live tasks and running runs per class (of one tenant's tasks when `scope` is given)."""
    tasks = select(Task.quota_class, func.count()).where(Task.quota_class.is_not(None), Task.deleted_at.is_(None))
    running = (select(Task.quota_class, func.count()).join(Run, Run.task_id == Task.id)
               .where(Task.quota_class.is_not(None), Run.status == "running"))
    if scope is not None:
        tasks, running = tasks.where(Task.tenant_id == scope), running.where(Task.tenant_id == scope)
    return (dict(db.session.execute(tasks.group_by(Task.quota_class)).all()),
            dict(db.session.execute(running.group_by(Task.quota_class)).all()))


def as_dict(record: QuotaClass, tasks: int | None = None) -> dict:
    """Describe a class for the API."""
    found = {"name": record.name, "max_running": record.max_running, "description": record.description,
             "created_at": record.created_at.isoformat(), "updated_at": record.updated_at.isoformat()}
    return found if tasks is None else {**found, "tasks": tasks}
