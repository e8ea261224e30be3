"""Conflict templates: named planner rules tasks reference; versioned edits that rewrite the tasks inheriting them."""

from sqlalchemy import delete as sql_delete
from sqlalchemy import select, update

from console.db import locks
from console.domain import conflict_rules, names
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.task_defaults import TaskDefaults
from console.extensions import db
from console.models import ConflictTemplate, ConflictTemplateVersion, Task
from console.services import inputs, versioning
from console.services.actor import SYSTEM, Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict, InvalidInput, NotFound
from console.services.policies import versions as policies
from console.services.scheduling import on_demand, quota_classes

SHOWN_NAMES = 10


def validated(rules, field_prefix: str = "rules") -> dict:
    """Check a template's rules (missing ones take their built-in value), or raise a 422 naming the field."""
    try:
        return conflict_rules.checked(rules if rules is not None else {}, f"{field_prefix}.")
    except conflict_rules.RuleError as error:
        raise InvalidInput(error.message, error.field) from None


def find(name) -> ConflictTemplate | None:
    """Return the named template, if any."""
    if not names.is_name(name):
        return None  # no such name can exist
    # Read afresh: after waiting for a template's lock, the version in force may be newer than the session holds.
    return db.session.execute(select(ConflictTemplate).where(ConflictTemplate.name == name)
                              .execution_options(populate_existing=True)).scalar_one_or_none()


def get(name: str) -> ConflictTemplate:
    """Return the named template or raise NotFound."""
    record = find(name)
    if record is None:
        raise NotFound(f"no conflict template named {name!r}")
    return record


def require(name, field: str = "template") -> ConflictTemplate:
    """Return the named template or raise a 422 naming the field."""
    if not isinstance(name, str):
        raise InvalidInput(f"{field} must be a conflict template's name or null, got {type(name).__name__}", field)
    record = find(name)
    if record is None:
        raise InvalidInput(f"no conflict template named {name!r}", field)
    return record


def lock(*names: str) -> None:
    """Hold the named templates' locks (in name order, so two holders of the same pair cannot deadlock)."""
    for name in sorted(set(names)):
        locks.hold(f"template:{name}")


def current_version(record: ConflictTemplate) -> ConflictTemplateVersion:
    """Return the version in force."""
    return db.session.execute(select(ConflictTemplateVersion).where(
        ConflictTemplateVersion.template_id == record.id,
        ConflictTemplateVersion.version == record.current_version)).scalar_one()


def rules_of(record: ConflictTemplate) -> dict:
    """Return the rules in force of a template, every rule present."""
    return {**conflict_rules.BUILT_IN, **current_version(record).rules}


def inheriting(record: ConflictTemplate, scope: int | None = None):
    """Return a query of the live tasks that reference this template (of `scope` only, if given)."""
    query = select(Task).where(Task.template_id == record.id, Task.deleted_at.is_(None))
    return query.where(Task.tenant_id == scope) if scope is not None else query


def changes_for(task: Task, rules: dict) -> list[tuple[str, object, object]]:
    """List (rule, value now, value under `rules`) for each rule the task inherits whose value would change."""
    inherited = set(task.inherits or ())
    return [(name, getattr(task, name), rules[name]) for name in conflict_rules.RULES
            if name in inherited and getattr(task, name) != rules[name]]


def check_description(description) -> None:
    """Refuse a description that is not text of at most 255 characters."""
    if description is not None and (not isinstance(description, str) or len(description) > 255):
        raise InvalidInput("description is text of at most 255 characters", "description")


def save(name: str, rules: dict, actor: Actor, *, description: str | None = None, new_only: bool = False,
         base_version: int | None = None, clock: Clock = SYSTEM_CLOCK) -> ConflictTemplate:
    """Create a template or add a new version, rewriting the rules of the tasks that inherit them; one commit.

    `new_only`: a template of that name existing already (created by someone else meanwhile) is a 409.
    `base_version`: the version the change was made from; another one in force is a 409 (StaleVersion).
    """
    inputs.name(name, "template")
    check_description(description)
    new = validated(rules)
    # Two saves at once would both take the next version number, and a task save between our read of the tasks
    # and our write would be overwritten: one at a time (task saves take the same lock), read afresh.
    lock(name)
    try:
        quota_classes.hold(new["quota_class"], "rules.quota_class")
    except InvalidInput:
        db.session.rollback()
        raise
    record = db.session.execute(select(ConflictTemplate).where(ConflictTemplate.name == name)
                                .execution_options(populate_existing=True)).scalar_one_or_none()
    now, before, changed, followed = clock(), None, [], []
    if record is not None and new_only:
        db.session.rollback()
        raise Conflict(f"a conflict template named {name!r} exists already; edit it instead", "name")
    versioning.check(base_version, f"conflict template {name!r}", record.current_version if record else None,
                     lambda: current_version(record).created_by)
    if record is None:
        record = ConflictTemplate(name=name, description=description or "", current_version=1, created_at=now,
                                  updated_at=now)
        db.session.add(record)
        db.session.flush()
    else:
        before = rules_of(record)
        if before == new and (description is None or description == record.description):
            db.session.commit()  # nothing to change; ends the transaction, so the lock is not kept
            return record
        record.current_version += 1
        if description is not None:
            record.description = description
        record.updated_at = now
        changed, followed = _apply(record, new, actor, now, clock)
    db.session.add(ConflictTemplateVersion(template_id=record.id, version=record.current_version, rules=new,
                                           created_by=actor.name, created_at=now, tasks_changed=len(changed)))
    audit.record(db.session, actor, "template.save", "conflict_template", name, before=before, after=new,
                 note=_note(record.current_version, changed), clock=clock)
    db.session.commit()
    for task, runs in followed:
        on_demand.queue_followed(task, runs)
    return record


def _apply(record: ConflictTemplate, rules: dict, actor: Actor, now,
           clock: Clock) -> tuple[list[Task], list[tuple[Task, on_demand.WindowFollowed]]]:
    """Write the new rules into every task that inherits a changed one, and move or start its runs waiting for a
    window that changed, as a task's own edit does; audit each task's change. Return the tasks changed, and the runs
    to queue once committed."""
    tasks = db.session.execute(inheriting(record).execution_options(populate_existing=True)).scalars().all()
    changed, rows, followed = [], [], []
    for task in tasks:
        diff = changes_for(task, rules)
        if not diff:
            continue
        for rule, _, value in diff:
            setattr(task, rule, value)
        # The scheduler resyncs on updated_at: misfire grace is part of a schedule.
        task.updated_at = now
        changed.append(task)
        # A template's window removed or moved left its tasks' waiting runs at the old opening (helper 157).
        runs = on_demand.follow_new_window(task, actor, now) if any(rule == "window" for rule, *_ in diff) else None
        if runs is not None:
            followed.append((task, runs))
        rows.append(audit.Change(task.id, {rule: old for rule, old, _ in diff},
                                 {**{rule: new for rule, _, new in diff}, **(runs.audited() if runs else {})},
                                 task.tenant.name))
    if rows:
        audit.record_many(db.session, actor, "task.template_applied", "task", rows,
                          note=f"template {record.name} version {record.current_version}", clock=clock)
    return changed, followed


def _note(version: int, changed: list[Task]) -> str:
    if not changed:
        return f"version {version}; no task changed"
    return f"version {version}; changed {len(changed)} task(s): {named(changed)}"


def named(tasks: list[Task]) -> str:
    """Name a few tasks (tenant/name), and how many more."""
    shown = ", ".join(f"{task.tenant.name}/{task.name}" for task in tasks[:SHOWN_NAMES])
    return shown + (f" and {len(tasks) - SHOWN_NAMES} more" if len(tasks) > SHOWN_NAMES else "")


def delete(name: str, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> None:
    """Delete a template no live task references; one still in use is a 409 naming the tasks."""
    get(name)  # a 404 before taking a lock by a name that cannot exist
    lock(name)
    record = get(name)
    users = db.session.execute(inheriting(record).order_by(Task.tenant_id, Task.name)).scalars().all()
    if users:
        db.session.rollback()
        raise Conflict(f"conflict template {name!r} is used by {len(users)} task(s): {named(users)}; point them at "
                       "another template (or none) first", "name")
    before = rules_of(record)
    # Deleted tasks keep their rules as they were; only the reference goes.
    db.session.execute(update(Task).where(Task.template_id == record.id).values(template_id=None, inherits=None)
                       .execution_options(synchronize_session=False))
    db.session.execute(sql_delete(ConflictTemplateVersion).where(ConflictTemplateVersion.template_id == record.id))
    db.session.delete(record)
    audit.record(db.session, actor, "template.delete", "conflict_template", name, before=before,
                 note=f"at version {record.current_version}", clock=clock)
    db.session.commit()


def load_defaults(defaults: TaskDefaults, path: str) -> list[str]:
    """Create the defaults file's template if the database has none of its name; check its retry policy exists."""
    if policies.find(defaults.policy) is None:
        raise SystemExit(f"{path}: retry.policy: no retry policy named {defaults.policy!r} (create it on Policies "
                         "or in config/tasks/retry-policies.yaml)")
    if find(defaults.template) is not None:
        return []
    try:
        save(defaults.template, defaults.rules, SYSTEM, description=defaults.description)
    except InvalidInput as error:
        raise SystemExit(f"{path}: conflict.{error.field}: {error.detail}") from None
    return [defaults.template]


def all_templates() -> list[ConflictTemplate]:
    """Return every template, by name."""
    return db.session.execute(select(ConflictTemplate).order_by(ConflictTemplate.name)).scalars().all()


def as_dict(record: ConflictTemplate) -> dict:
    """Describe a template for the API."""
    version = current_version(record)
    return {"name": record.name, "description": record.description, "version": version.version,
            "updated_at": record.updated_at.isoformat(), "updated_by": version.created_by,
            "rules": {**conflict_rules.BUILT_IN, **version.rules}}
