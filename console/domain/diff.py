"""A before → after diff people can read: one row per changed field, nested objects by their path."""

import json
from dataclasses import dataclass

MISSING = object()


@dataclass(frozen=True)
class FieldChange:
    path: str  # "params.fail_times"; "" for a value that is not an object
    before: object = MISSING
    after: object = MISSING

    @property
    def change(self) -> str:
        """Tell whether the field was added, removed or changed."""
        if self.before is MISSING:
            return "added"
        return "removed" if self.after is MISSING else "changed"


def _in_order(key) -> tuple:
    """Order keys as people count: ids held as text ("70", "107") by number, before any other key by its text."""
    text = str(key)
    return (0, int(text), "") if text.isdigit() and len(text) < 19 else (1, 0, text)


def _walk(before, after, path: str, found: list[FieldChange]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted({*before, *after}, key=_in_order):
            _walk(before.get(key, MISSING), after.get(key, MISSING), f"{path}.{key}" if path else str(key), found)
    elif before != after:
        found.append(FieldChange(path, before, after))


def changes(before, after) -> list[FieldChange]:
    """Return the fields that differ between two JSON values, in path order; objects are compared key by key."""
    found: list[FieldChange] = []
    _walk({} if before is None else before, {} if after is None else after, "", found)
    return found


def shown(value) -> str:
    """Show one side of a change as JSON, indented when it is an object or a list; a missing side as '—'."""
    if value is MISSING:
        return "—"
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return json.dumps(value, ensure_ascii=False, default=str)
