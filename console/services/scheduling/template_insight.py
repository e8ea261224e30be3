"""What the console shows beside a conflict template: the tasks an edit changes, its history, a task's sources."""

from dataclasses import dataclass

from sqlalchemy import func, select

from console.domain import conflict_rules
from console.extensions import db
from console.models import ConflictTemplate, ConflictTemplateVersion, Task
from console.services.scheduling import quota_classes, templates

HISTORY_PAGE = 50
PREVIEW_ROWS = 100


@dataclass(frozen=True)
class TaskChange:
    """One task an edit would change, and how."""

    task: Task
    changes: list[tuple[str, object, object]]


@dataclass(frozen=True)
class Preview:
    """The tasks a proposed set of rules changes (the first PREVIEW_ROWS), how many in all, and who inherits."""

    rules: dict
    changed: list[TaskChange]
    changed_total: int
    referencing: int


def preview(record: ConflictTemplate | None, rules: dict, scope: int | None = None) -> Preview:
    """Validate proposed rules and list the live tasks they would change; raise InvalidInput naming a bad field."""
    new = templates.validated(rules)
    quota_classes.require_existing(new["quota_class"], "rules.quota_class")  # as a save would refuse it
    if record is None:
        return Preview(new, [], 0, 0)
    changed, referencing = [], 0
    for task in db.session.execute(templates.inheriting(record, scope).order_by(Task.tenant_id, Task.name)).scalars():
        referencing += 1
        diff = templates.changes_for(task, new)
        if diff:
            changed.append(TaskChange(task, diff))
    return Preview(new, changed[:PREVIEW_ROWS], len(changed), referencing)


def task_counts(scope: int | None) -> dict[int, int]:
    """Count live tasks per template id."""
    query = (select(Task.template_id, func.count()).where(Task.deleted_at.is_(None), Task.template_id.is_not(None))
             .group_by(Task.template_id))
    if scope is not None:
        query = query.where(Task.tenant_id == scope)
    return dict(db.session.execute(query).all())


@dataclass(frozen=True)
class TemplateRow:
    record: ConflictTemplate
    version: ConflictTemplateVersion
    tasks: int

    @property
    def rules(self) -> dict:
        return {**conflict_rules.BUILT_IN, **self.version.rules}


def overview(scope: int | None) -> list[TemplateRow]:
    """List every template with its version in force and how many tasks (of `scope`) reference it."""
    counts = task_counts(scope)
    rows = db.session.execute(
        select(ConflictTemplate, ConflictTemplateVersion)
        .join(ConflictTemplateVersion, (ConflictTemplateVersion.template_id == ConflictTemplate.id)
              & (ConflictTemplateVersion.version == ConflictTemplate.current_version))
        .order_by(ConflictTemplate.name)).all()
    return [TemplateRow(record, version, counts.get(record.id, 0)) for record, version in rows]


@dataclass(frozen=True)
class VersionChange:
    version: ConflictTemplateVersion
    changes: list[tuple[str, object, object]]

    @property
    def created(self) -> bool:
        return self.version.version == 1


def history(record: ConflictTemplate, before: int | None = None,
            limit: int = HISTORY_PAGE) -> tuple[list[VersionChange], int | None]:
    """Return versions newest first (below `before`), each with its diff, and the cursor of the next page."""
    query = select(ConflictTemplateVersion).where(ConflictTemplateVersion.template_id == record.id)
    if before is not None:
        query = query.where(ConflictTemplateVersion.version < before)
    # One extra row: the predecessor of the oldest shown version, for its diff.
    rows = db.session.execute(query.order_by(ConflictTemplateVersion.version.desc()).limit(limit + 1)).scalars().all()
    shown, found = rows[:limit], []
    for index, version in enumerate(shown):
        previous = rows[index + 1].rules if index + 1 < len(rows) else None
        new = {**conflict_rules.BUILT_IN, **version.rules}
        found.append(VersionChange(version, conflict_rules.changes(
            {**conflict_rules.BUILT_IN, **previous} if previous else {}, new)))
    return found, shown[-1].version if len(rows) > limit else None


@dataclass(frozen=True)
class RuleSource:
    """One rule of a task: the value in force and where it comes from."""

    rule: str
    value: object
    template: str | None  # the template's name when the value is inherited, else None (the task's own)


def sources(task: Task) -> list[RuleSource]:
    """Return each rule of a task with its value in force and whether it is the task's own or its template's."""
    inherited, name = set(task.inherits or ()), template_name(task)
    return [RuleSource(rule, getattr(task, rule), name if rule in inherited else None)
            for rule in conflict_rules.RULES]


def template_name(task: Task) -> str | None:
    """Return the name of the template a task references, if any."""
    if task.template_id is None:
        return None
    return db.session.execute(select(ConflictTemplate.name).where(ConflictTemplate.id == task.template_id)
                              ).scalar_one_or_none()
