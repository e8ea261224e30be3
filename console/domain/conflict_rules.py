"""A task's planner rules (mutex, window, misfire grace, SLA, quota class) and how a conflict template supplies them."""

from collections.abc import Mapping

from console.domain import keys, names
from console.domain.policy import PolicyError, RetryPolicy, sla_out_of_order
from console.domain.windows import Window, WindowError

# The rules a conflict template may hold; a task takes each from its template unless it sets the rule itself.
RULES = ("mutex_key", "concurrency_policy", "window", "misfire_grace_s", "sla", "quota_class")
CONCURRENCY_POLICIES = ("allow", "forbid", "replace")
# What a task with neither its own value nor a template has: the values tasks had before templates existed.
BUILT_IN = {"mutex_key": None, "concurrency_policy": "allow", "window": None, "misfire_grace_s": 300, "sla": None,
            "quota_class": None}
MAX_MISFIRE_GRACE_S = 86_400


class RuleError(ValueError):
    """A rule value that cannot be used, naming the field to fix."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def check(name: str, value):
    """Return one rule's value as stored, or raise RuleError naming it."""
    if name == "mutex_key":
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 120):
            raise RuleError("mutex_key", "mutex_key is a string of 1-120 characters")
        # "ledger" and "ledger\u200b" look alike on every page and are two keys: the runs meant to exclude each other
        # would not (helper 155).
        if value is not None and (said := keys.hidden(value, "mutex_key")):
            raise RuleError("mutex_key", said)
        return value
    if name == "concurrency_policy":
        if value not in CONCURRENCY_POLICIES:
            raise RuleError("concurrency_policy", f"concurrency_policy is one of {', '.join(CONCURRENCY_POLICIES)}")
        return value
    if name == "window":
        if value is None:
            return None
        try:
            return Window.from_mapping(value).to_dict()
        except WindowError as error:
            raise RuleError(error.field, error.message) from None
    if name == "misfire_grace_s":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MISFIRE_GRACE_S:
            raise RuleError("misfire_grace_s",
                            f"misfire_grace_s must be a whole number of seconds from 0 to {MAX_MISFIRE_GRACE_S}")
        return value
    if name == "sla":
        return _sla(value)
    if name == "quota_class":
        # Whether the class exists is the service's question.
        if value is not None and not names.is_name(value):
            raise RuleError("quota_class", f"quota_class is a quota class's name ({names.RULE}) or null")
        return value
    raise RuleError(name, f"unknown rule {name!r}; the rules are {', '.join(RULES)}")


def _sla(value) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - {"max_start_delay_s", "deadline_s"}:
        raise RuleError("sla", "sla is an object with max_start_delay_s and/or deadline_s")
    try:
        RetryPolicy.from_mapping({"sla": dict(value)})
    except PolicyError as error:
        raise RuleError(error.field, error.message) from None
    found = sla_out_of_order({"sla": dict(value)})
    if found:
        raise RuleError(found[0].field, found[0].message)
    return dict(value)


def checked(values: Mapping, prefix: str = "") -> dict:
    """Check a template's rules (every one present, missing ones at their built-in value); raise RuleError."""
    if not isinstance(values, Mapping):
        raise RuleError(prefix.rstrip(".") or "rules", f"expected a mapping of {', '.join(RULES)}")
    unknown = sorted(set(values) - set(RULES))
    if unknown:
        raise RuleError(prefix + str(unknown[0]), f"unknown rule; a template holds {', '.join(RULES)}")
    rules = {}
    for name in RULES:
        try:
            rules[name] = check(name, values.get(name, BUILT_IN[name]))
        except RuleError as error:
            raise RuleError(prefix + error.field, error.message) from None
    return rules


def effective(own: Mapping, template: Mapping | None) -> dict:
    """Return every rule's value in force: the task's own, else its template's, else the built-in one."""
    return {name: own[name] if name in own else (template or BUILT_IN).get(name, BUILT_IN[name]) for name in RULES}


def changes(old: Mapping, new: Mapping) -> list[tuple[str, object, object]]:
    """List (rule, old, new) for each rule whose value differs, in RULES order."""
    return [(name, old.get(name), new.get(name)) for name in RULES if old.get(name) != new.get(name)]
