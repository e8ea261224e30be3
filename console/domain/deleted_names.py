"""A deleted task keeps its row (its runs' history) under a freed name; people read its old name, marked deleted."""

MARK = "~deleted-"  # a live task's name cannot hold "~" (definitions.NAME), so the mark is never a person's text


def freed(name: str, task_id: int, width: int = 120) -> str:
    """Return the name a deleted task keeps, leaving its old one to a new task."""
    suffix = f"{MARK}{task_id}"
    return name[: width - len(suffix)] + suffix


def shown(name: str | None) -> str | None:
    """Return a task's name as people read it: a deleted one's old name with "(deleted)"."""
    if not name:
        return name
    old, mark, task_id = name.rpartition(MARK)
    return f"{old} (deleted)" if mark and task_id.isdigit() else name
