"""The tasks' defaults file (config/tasks/default_policy.yaml): parsed strictly, every error naming its key."""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from console.domain import conflict_rules

SECTIONS = ("retry", "conflict", "sla")
RETRY_KEYS = ("policy",)
CONFLICT_KEYS = ("template", "description", "rules")
SLA_KEYS = ("max_start_delay_s", "deadline_s")
# Retry policies and conflict templates share one naming rule (console/services/policies/versions.py).
NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")

TEMPLATE = """\
# Defaults for tasks, read at every start of every process; a value that does not validate stops the start with
# the key to fix. A task created without these rules gets them (console: Tasks -> Conflict templates).
retry:
  # The retry policy a task naming none runs under (`default` follows the worker pool's defaults file).
  policy: default
conflict:
  # The conflict template a new task references when it names none (API: "template": null for none).
  template: default
  # The template is created from these when the database has none of that name; after that the database is the
  # truth: edit it on Tasks -> Conflict templates (versioned, audited).
  description: "Shipped defaults: no mutex, any time, misfires caught up within 5 minutes."
  rules:
    mutex_key: null            # runs sharing a key are not meant to overlap
    concurrency_policy: allow  # allow | forbid | replace, while a run with the same key is active
    window: null               # e.g. {days: [mon, tue, wed, thu, fri], start: "08:00", end: "18:00", timezone: UTC}
    misfire_grace_s: 300       # the latest firing missed while no scheduler ran is caught up once if at most this old
# The default template's SLA; a field left null falls back to the task's retry policy's SLA.
sla:
  max_start_delay_s: null      # a run must start this soon after its time
  deadline_s: null             # a run must succeed this soon after its time
"""


class TaskDefaultsError(ValueError):
    """A value of the tasks' defaults file that cannot be used, naming its key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


@dataclass(frozen=True)
class TaskDefaults:
    policy: str  # the retry policy a task naming none gets
    template: str  # the conflict template a new task naming none references
    description: str = ""
    rules: dict = field(default_factory=lambda: dict(conflict_rules.BUILT_IN))  # the template's, SLA included


def _section(data: Mapping, name: str, keys: tuple[str, ...]) -> Mapping:
    section = data.get(name) or {}
    if not isinstance(section, Mapping):
        raise TaskDefaultsError(name, f"expected a mapping of {', '.join(keys)}, got {section!r}")
    for key in section:
        if key not in keys:
            raise TaskDefaultsError(f"{name}.{key}", f"unknown key; {name} takes {', '.join(keys)}")
    return section


def _name(section: Mapping, key: str, where: str) -> str:
    value = section.get(key, "default")
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise TaskDefaultsError(where, f"a name of 1-64 lowercase letters, digits, '.', '_' or '-', got {value!r}")
    return value


def parse(data) -> TaskDefaults:
    """Build the tasks' defaults from the file's mapping (missing keys take the built-in defaults)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise TaskDefaultsError("file", "expected a mapping with retry, conflict and sla")
    for key in data:
        if key not in SECTIONS:
            raise TaskDefaultsError(str(key), "unknown section; the file has retry, conflict and sla")
    retry = _section(data, "retry", RETRY_KEYS)
    conflict = _section(data, "conflict", CONFLICT_KEYS)
    description = conflict.get("description") or ""
    if not isinstance(description, str) or len(description) > 255:
        raise TaskDefaultsError("conflict.description", "text of at most 255 characters")
    rules = conflict.get("rules") or {}
    if not isinstance(rules, Mapping):
        raise TaskDefaultsError("conflict.rules", f"expected a mapping of rules, got {rules!r}")
    if "sla" in rules:
        raise TaskDefaultsError("conflict.rules.sla", "the template's SLA is the file's sla section")
    sla = {key: value for key, value in _section(data, "sla", SLA_KEYS).items() if value is not None}
    try:
        checked = conflict_rules.checked({**rules, "sla": sla or None})
    except conflict_rules.RuleError as error:
        key = error.field if error.field.startswith("sla") else f"conflict.rules.{error.field}"
        raise TaskDefaultsError(key, error.message) from None
    return TaskDefaults(_name(retry, "policy", "retry.policy"), _name(conflict, "template", "conflict.template"),
                        description, checked)
