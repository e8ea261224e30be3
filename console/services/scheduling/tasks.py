"""Task definitions: register, edit, pause, resume, delete — validated like the API promises."""

from datetime import datetime

from sqlalchemy import func, select, update

from console.db import locks
from console.domain import conflict_rules, deleted_names
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Run, Task, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict, InvalidInput, NotFound
from console.services.policies.tenant_overrides import keep_breaker_to_tenant
from console.services.scheduling import definitions, on_demand, task_query, template_insight

CONCURRENCY_POLICIES = conflict_rules.CONCURRENCY_POLICIES


def _validated(data: dict, tenant: Tenant, current: Task | None = None) -> dict:
    """Return the column values of a task definition, or raise the first refusal of its fields."""
    values, found = definitions.checked(data, tenant, current)
    if found:
        raise found[0]
    return values


def problems(tenant: Tenant, data: dict, current: Task | None = None) -> list[InvalidInput | Conflict]:
    """Return every refusal of a task definition at once (a form marks them all), a taken name too; [] if none."""
    values, found = definitions.checked(data, tenant, current)
    if values["name"] is not None:
        try:
            _check_name_free(tenant, values["name"], current.id if current else None)
        except Conflict as error:
            found.append(error)
    return found


def snapshot(task: Task) -> dict:
    """Describe a task for the audit log and the API: every rule in force, its template and what it inherits."""
    return {**definitions.as_input(task), **{rule: getattr(task, rule) for rule in conflict_rules.RULES},
            "template": template_insight.template_name(task), "inherit": sorted(task.inherits or ()),
            "tenant": task.tenant.name}


def _check_name_free(tenant: Tenant, name: str, own_id: int | None = None) -> None:
    taken = db.session.execute(select(Task.id).where(Task.tenant_id == tenant.id, Task.name == name,
                                                     Task.id != (own_id or 0))).first()
    if taken:
        raise Conflict(f"tenant {tenant.name} already has a task named {name!r}", "name")


def register(tenant: Tenant, data: dict, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> Task:
    """Create a task from a request body; a name already used in the tenant is a 409."""
    keep_breaker_to_tenant(data.get("policy"), actor)
    values = _validated(data, tenant)
    _check_name_free(tenant, values["name"])
    now = clock()
    task = Task(**values, created_at=now, updated_at=now)
    db.session.add(task)
    db.session.flush()
    audit.record(db.session, actor, "task.register", "task", task.id, after=snapshot(task), tenant=tenant.name,
                 clock=clock)
    db.session.commit()
    return task


# What to do after a refused stale save, by where the `seen` time came from.
AGAIN = {"seen": "Reload the page to see the change (the audit log says who made it), then make yours again",
         "base_updated_at": "GET the task again to see the change (the audit log says who made it), then send yours "
                            "with its updated_at as base_updated_at"}


def edit(task: Task, data: dict, actor: Actor, clock: Clock = SYSTEM_CLOCK, *, seen: datetime | None = None,
         seen_field: str = "seen") -> Task:
    """Change some fields of a task, validated as a whole; with `seen` (the updated_at the editor read), refuse with a
    409 if anyone changed the task since, rather than silently put back what they changed."""
    if "tenant" in data and data["tenant"] not in (None, task.tenant.name):
        raise InvalidInput(f"a task stays in its tenant ({task.tenant.name}); register a new task in the other one",
                           "tenant")
    data = {k: v for k, v in data.items() if k != "tenant"}
    keep_breaker_to_tenant(data.get("policy"), actor)
    values = _validated(data, task.tenant, current=task)
    _check_name_free(task.tenant, values["name"], task.id)
    if seen is not None:
        # After the template's lock (taken by the checks), as a template save takes it before rewriting task rows:
        # the same order, so the two cannot deadlock. Compare and claim in one statement: it holds the row
        # (PostgreSQL) or the write lock (SQLite) until the commit.
        claimed = db.session.execute(update(Task).where(Task.id == task.id, Task.updated_at == seen)
                                     .values(updated_at=clock()).execution_options(synchronize_session=False))
        if not claimed.rowcount:
            db.session.rollback()
            read = "you opened this form" if seen_field == "seen" else f"the updated_at you sent ({seen.isoformat()})"
            raise Conflict(f"{task.name} was changed since {read}; nothing was saved. {AGAIN[seen_field]}",
                           seen_field)
    # Held to the commit and read again (after the template's lock, in that order as above): "before" is what this
    # edit replaces, and what it leaves is validated whole, when an edit of other fields committed meanwhile.
    task = locks.fresh_row(Task, task.id)
    before = snapshot(task)
    values = _validated(data, task.tenant, current=task)
    was_paused, schedule, window = task.paused, (task.cron, task.timezone), task.window
    for key, value in values.items():
        setattr(task, key, value)
    task.updated_at = clock()
    _note_resume(task, was_paused)
    if task.cron and (task.cron, task.timezone) != schedule:
        # The new schedule starts now: its firings before the edit were never due. The catch-up counted them from
        # the last firing under the old one, fired one for a time before the edit and counted the rest missed,
        # feeding the scheduling failure alert (helper 151).
        task.resumed_at = task.updated_at
    after = snapshot(task)
    if after == before:
        # Nothing changed: updated_at stays, or the next careful editor would get a 409 for a change nobody made
        # (and no audit row to show for it).
        db.session.rollback()
        return task
    followed = (on_demand.follow_new_window(task, actor, task.updated_at) if task.window != window
                else on_demand.WindowFollowed())
    audit.record(db.session, actor, "task.edit", "task", task.id, before=before, after={**after, **followed.audited()},
                 tenant=task.tenant.name, clock=clock)
    db.session.commit()
    on_demand.queue_followed(task, followed)
    return task


def set_paused(task: Task, paused: bool, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> Task:
    """Pause or resume a task's triggers (runs already created carry on)."""
    task = locks.fresh_row(Task, task.id)  # four pauses at once are one change, audited once
    if task.paused != paused:
        was_paused = task.paused
        task.paused, task.updated_at = paused, clock()
        _note_resume(task, was_paused)
        audit.record(db.session, actor, "task.pause" if paused else "task.resume", "task", task.id,
                     before={"paused": not paused}, after={"paused": paused}, tenant=task.tenant.name, clock=clock)
        db.session.commit()
    return task


def _note_resume(task: Task, was_paused: bool) -> None:
    """Record a resume: the catch-up counts firings from it on, as the pause skipped those before (task_jobs)."""
    if was_paused and not task.paused:
        task.resumed_at = task.updated_at


WAITING = ("pending", "retry_wait")  # created, not started or between attempts: a deleted task's still run


def delete(task: Task, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> int:
    """Delete a task (kept for its runs' history; it never fires again); return how many of its runs still wait
    to start or retry (they run unless someone cancels them)."""
    now = clock()
    # Read again under a row lock: a pause or an edit committed since this request read the task is what is deleted,
    # and what its audit row must say.
    locked = db.session.execute(select(Task).where(Task.id == task.id, Task.deleted_at.is_(None)).with_for_update()
                                .execution_options(populate_existing=True)).scalar_one_or_none()
    if locked is None:
        db.session.rollback()
        raise NotFound(f"no task with id {task.id}: it was deleted meanwhile")
    before = snapshot(locked)
    # Claimed in one guarded statement: two deletes of one task at once (a double click, a retried call) freed its
    # name twice ("b4c~deleted-23~deleted-23") and audited two deletes.
    claimed = db.session.execute(update(Task).where(Task.id == task.id, Task.deleted_at.is_(None)).values(
        deleted_at=now, updated_at=now, name=deleted_names.freed(task.name, task.id))
        .execution_options(synchronize_session=False))
    if not claimed.rowcount:
        db.session.rollback()
        raise NotFound(f"no task with id {task.id}: it was deleted meanwhile")
    db.session.expire(task, ["deleted_at", "updated_at", "name"])
    waiting = db.session.execute(select(func.count()).select_from(Run).where(
        Run.task_id == task.id, Run.status.in_(WAITING))).scalar_one()
    audit.record(db.session, actor, "task.delete", "task", task.id, before=before, tenant=task.tenant.name,
                 after={"waiting_runs": waiting} if waiting else None, clock=clock)
    db.session.commit()
    return waiting


def get(task_id, tenant_id: int | None = None) -> Task:
    """Return a live task visible to this tenant scope, or raise NotFound."""
    task = db.session.get(Task, task_id) if isinstance(task_id, int) and not isinstance(task_id, bool) else None
    if task is None or (tenant_id is not None and task.tenant_id != tenant_id):
        raise NotFound(f"no task with id {task_id}")
    if task.deleted_at is not None:  # said so: an edit saved after someone deleted the task read a bare "no task"
        raise NotFound(f"no task with id {task_id}: it was deleted")
    return task


def next_runs(task: Task, now: datetime, count: int = 5) -> list[datetime]:
    """Return the next firing times in the task's timezone (none for event-only tasks), as task_query.firing_times."""
    return task_query.firing_times(task, now, count)


def recent_runs(task: Task, limit: int = 50) -> list[Run]:
    """Return the task's runs, newest first."""
    return db.session.execute(select(Run).where(Run.task_id == task.id).order_by(Run.id.desc()).limit(limit)
                              ).scalars().all()


def schedule_fingerprint() -> tuple:
    """Return something that changes whenever any task changes (the scheduler polls it to resync)."""
    return tuple(db.session.execute(select(func.count(Task.id), func.max(Task.updated_at))).one())


def record_fired(task_id: int, scheduled_for: datetime) -> None:
    """Remember the latest firing of a task (for catching up after downtime)."""
    db.session.execute(update(Task).where(Task.id == task_id).values(last_fired_for=scheduled_for)
                       .execution_options(synchronize_session=False))
