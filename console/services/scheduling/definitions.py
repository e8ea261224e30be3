"""A task definition checked field by field: the column values, or every refusal at once (a form marks them all)."""

import re

from console.domain import conflict_rules, cron
from console.domain.policy import PolicyError
from console.extensions import db
from console.models import RetryPolicyRecord, Task, Tenant
from console.services.engine import handler_kinds
from console.services.errors import InvalidInput
from console.services.inputs import params_too_large
from console.services.policies import versions as policies
from console.services.scheduling import quota_classes, sla, template_insight, templates
from console.services.settings import setting

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.:/-]{0,119}")
EVENT = re.compile(r"[a-z0-9][a-z0-9_.-]{0,119}")
FIELDS = {"name", "tenant", "handler", "params", "cron", "timezone", "event", "policy", "mutex_key",
          "concurrency_policy", "window", "jitter_s", "debounce_s", "sla", "misfire_grace_s", "paused", "template",
          "inherit", "quota_class"}

# A setting that shapes one trigger's firings, and the trigger: without it the setting would do nothing.
# Said in words both a form and an API client read: the field itself is named by the refusal's `field`.
SHAPED = {"jitter_s": ("cron", "a jitter spreads cron firings", "a cron expression", "the jitter"),
          "debounce_s": ("event", "a debounce collapses repeated events", "an event name", "the debounce")}


def _whole(data: dict, name: str, low: int, high: int, default: int) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be a whole number of seconds from {low} to {high}", name)
    return value


class _Refusals:
    """The refusals of a definition's fields, gathered so that every one is said at once."""

    def __init__(self):
        self.found: list[InvalidInput] = []

    def check(self, function, *args, failed=None):
        """Return function(*args), or `failed` after noting the InvalidInput it raised."""
        try:
            return function(*args)
        except InvalidInput as error:
            self.found.append(error)
            return failed


def checked(data: dict, tenant: Tenant, current: Task | None = None) -> tuple[dict, list[InvalidInput]]:
    """Check every field of a task definition; return the column values and every refusal, in field order."""
    refusals = _Refusals()
    unknown = sorted(set(data) - FIELDS)
    refusals.found += [InvalidInput(f"unknown field {name!r}; allowed: {', '.join(sorted(FIELDS))}", name)
                       for name in unknown]
    merged = {**(as_input(current) if current else {}), **data}
    if current is None and "policy" not in data:
        # A new task naming no policy gets the defaults file's (`default` is what a task without one runs under).
        default_policy = setting("TASK_DEFAULTS").policy
        merged["policy"] = None if default_policy == policies.DEFAULT else default_policy
    values = {"tenant_id": tenant.id, "name": refusals.check(_name, merged.get("name")),
              "params": refusals.check(_params, _unless_cleared(merged.get("params"), {}))}
    # Each said on its own: a mistyped cron hid a mistyped zone until it was fixed.
    values["timezone"] = refusals.check(_zone, merged)
    values["cron"] = refusals.check(_cron, merged, values["timezone"] or "UTC")
    values["event"] = refusals.check(_event, _unless_cleared(merged.get("event")))
    values["policy_id"], values["policy_overrides"] = refusals.check(_policy, merged.get("policy"),
                                                                     failed=(None, None))
    rules, values["template_id"], values["inherits"] = _rules(data, merged, current, refusals)
    if data.get("concurrency_policy") in ("forbid", "replace") and rules and not rules.get("mutex_key"):
        # It acts on the runs holding the same mutex key, so without one it did nothing, unsaid: read as Kubernetes'
        # concurrencyPolicy, it was taken to keep a task's own runs from overlapping (helper 151).
        refusals.found.append(InvalidInput(
            f"concurrency_policy {data['concurrency_policy']} needs a mutex_key: it decides what a firing does while "
            "another run holding the same key is active (give the task its own key to keep its runs from "
            "overlapping)", "concurrency_policy"))
    values.update(rules, handler=refusals.check(handler_kinds.normalise, merged.get("handler")),
                  jitter_s=refusals.check(_whole, merged, "jitter_s", 0, 3600, 0),
                  debounce_s=refusals.check(_whole, merged, "debounce_s", 0, 86_400, 0),
                  paused=refusals.check(_flag, merged, "paused"))
    for shaping in SHAPED:
        refusals.check(_trigger_fits, shaping, values, merged, data, current)
    if not refusals.found and (current is None or {"sla", "policy", "template"} & set(data)):
        refusals.check(_sla_in_order, values)
    return values, refusals.found


def _unless_cleared(value, cleared=None):
    """Return `cleared` for a field cleared (null, or "" as a form sends an empty box), else the value to check: 0,
    false or [] is a mistake to refuse, not a way to clear it ({"cron": false} unscheduled a task; helper 165)."""
    return cleared if value is None or value == "" else value


def _sla_in_order(values: dict) -> None:
    """Refuse a deadline shorter than the start limit in force, one of them the policy's (each SLA alone is checked
    where it is saved)."""
    own = values.get("sla") or {}
    start, deadline = sla.limits_of(own, values["policy_id"], values["policy_overrides"])
    if start is None or deadline is None or deadline >= start:
        return
    whose = {name: "this task's" if name in own else "its policy's" for name in ("max_start_delay_s", "deadline_s")}
    raise InvalidInput(f"sla: the deadline in force ({deadline} s, {whose['deadline_s']}) is shorter than the start "
                       f"limit in force ({start} s, {whose['max_start_delay_s']}): a run that starts within its limit "
                       "would already have missed its deadline; raise deadline_s or set max_start_delay_s", "sla")


def _trigger_fits(shaping: str, values: dict, merged: dict, data: dict, current: Task | None) -> None:
    """Refuse a jitter without a cron or a debounce without an event, once either side is being set."""
    trigger, does, missing, setting = SHAPED[shaping]
    touched = current is None or shaping in data or trigger in data
    if touched and values[shaping] and not merged.get(trigger):
        raise InvalidInput(f"{does} only, and this task has no {trigger}: give it {missing}, or set {setting} to 0",
                           shaping)

def _name(name) -> str:
    # Trimmed as the form trims it: "nightly " beside "nightly" was a second task nobody could tell apart.
    name = name.strip(" ") if isinstance(name, str) else name
    if not isinstance(name, str) or not NAME.fullmatch(name):  # fullmatch: "$" let a name end in a newline
        raise InvalidInput("name is 1-120 ASCII letters (a-z, A-Z), digits, spaces or . _ : / -, starting with a "
                           "letter or digit", "name")
    return name


def _params(params) -> dict:
    if not isinstance(params, dict):
        raise InvalidInput("params must be a JSON object", "params")
    if too_large := params_too_large(params):  # each run of the task carries them: a submit's limit holds here too
        raise InvalidInput(too_large, "params")
    return params


MAX_CRON = Task.cron.type.length


def _zone(merged: dict) -> str:
    """Return the task's time zone (UTC unless given), checked."""
    timezone = _unless_cleared(merged.get("timezone"), "UTC")
    if not isinstance(timezone, str):
        raise InvalidInput("timezone is an IANA name such as Europe/Berlin", "timezone")
    try:
        cron.load_zone(timezone)
    except cron.CronError as error:
        raise InvalidInput(error.message, error.field) from None
    return timezone


def _cron(merged: dict, timezone: str) -> str | None:
    """Return the cron expression, checked in the time zone (None for a task without one)."""
    # Neither cron nor event is allowed: such a task runs only when someone runs it (Run now, the API).
    expression = _unless_cleared(merged.get("cron"))
    if expression is None:
        return None
    if not isinstance(expression, str):
        raise InvalidInput("cron is a 5-field crontab expression such as '30 2 * * MON'", "cron")
    expression = " ".join(expression.split())  # stored and shown as one space between fields
    if not expression:
        return None  # spaces only: no cron, as an empty one
    if len(expression) > MAX_CRON:  # what the column holds: a longer one was a database error (500) on PostgreSQL
        raise InvalidInput(f"cron is at most {MAX_CRON} characters, got {len(expression)}; a range (1-5) or a "
                           "step (*/5) says a long list shorter", "cron")
    try:
        cron.parse(expression, timezone)
    except cron.CronError as error:
        raise InvalidInput(error.message, error.field) from None
    return expression


def is_event_name(name) -> bool:
    """Whether a task may listen for (and an event be posted as) this name; task.* names are the engine's."""
    # fullmatch: a "$" let a name end in a newline.
    return isinstance(name, str) and EVENT.fullmatch(name) is not None and not name.startswith("task.")


def _event(event) -> str | None:
    if event is not None and not is_event_name(event):
        raise InvalidInput("event is a lowercase name like order.created (task.* names are the engine's)", "event")
    return event


def _template_name(data: dict, current: Task | None) -> str | None:
    if "template" in data:
        return data["template"]
    if current is not None:
        return template_insight.template_name(current)
    # A new task naming no template references the defaults file's, once it exists.
    default = setting("TASK_DEFAULTS").template
    return default if templates.find(default) is not None else None


def _rules(data: dict, merged: dict, current: Task | None,
           refusals: _Refusals) -> tuple[dict, int | None, list[str] | None]:
    """Return the rules in force, the template's id and the rules taken from it (docs: "Conflict templates"), noting
    each refused rule in `refusals`."""
    name = _template_name(data, current)
    inherit = refusals.check(_inherit, data, name)
    if inherit is None:
        return {}, None, None
    # The task's own rules: those the request sets, and those it set before and still does.
    own = {rule: merged[rule] for rule in conflict_rules.RULES if rule in merged and rule not in inherit}
    if current is not None and name is None:
        # Without a template every rule is the task's own; one it inherited keeps the value it has now.
        own = {**{rule: getattr(current, rule) for rule in conflict_rules.RULES}, **own}
    if "concurrency_policy" in own and own["concurrency_policy"] in (None, ""):
        own["concurrency_policy"] = "allow"
    checked = {}
    for rule, value in own.items():
        try:
            checked[rule] = conflict_rules.check(rule, value)
        except conflict_rules.RuleError as error:
            refusals.found.append(InvalidInput(error.message, error.field))
    if len(checked) < len(own):
        return {}, None, None
    return refusals.check(_in_force, checked, name, current, failed=({}, None, None))


def _inherit(data: dict, template: str | None) -> list[str]:
    """Return the rules the request takes from its template."""
    inherit = data.get("inherit", [])
    if not isinstance(inherit, list) or any(rule not in conflict_rules.RULES for rule in inherit):
        raise InvalidInput(f"inherit is a list of rules taken from the template: {', '.join(conflict_rules.RULES)}",
                           "inherit")
    if inherit and template is None:
        raise InvalidInput("inherit needs a template to take the rules from", "inherit")
    both = sorted(set(inherit) & set(data))
    if both:
        raise InvalidInput(f"{both[0]} is both set and inherited; leave it out to inherit it", both[0])
    return inherit


def _in_force(checked: dict, name: str | None, current: Task | None) -> tuple[dict, int | None, list[str] | None]:
    """Return the rules in force with the template's (if any), holding the template and quota class named."""
    if name is None:
        rules = conflict_rules.effective(checked, None)
        quota_classes.hold(rules["quota_class"])
        return rules, None, None
    templates.require(name)  # a 422 before taking a lock by a name that cannot exist
    previous = template_insight.template_name(current) if current is not None else None
    # A template save rewrites the tasks inheriting from it: not while this task is being written. The template is
    # read after the lock, so its rules are those in force when this transaction commits.
    templates.lock(*[n for n in (name, previous) if n])
    record = templates.require(name)
    rules = conflict_rules.effective(checked, templates.rules_of(record))
    quota_classes.hold(rules["quota_class"])
    return rules, record.id, sorted(set(conflict_rules.RULES) - set(checked))


def _flag(data: dict, name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false", name)
    return value


def _policy(value) -> tuple[int | None, dict]:
    if value is None:
        return None, {}
    if isinstance(value, str):
        return policies.require(value).id, {}
    if isinstance(value, dict):
        overrides = dict(value)
        base = overrides.pop("name", None)
        base_id = policies.require(base, "policy.name").id if base else None
        try:
            policies.effective(base_id, overrides)
        except PolicyError as error:
            raise InvalidInput(error.message, f"policy.{error.field}") from None
        return base_id, overrides
    raise InvalidInput("policy is a policy name or an object of overrides (optionally with a base 'name')", "policy")


def as_input(task: Task) -> dict:
    """Return a task as the fields a request would send (so an edit can change only some): its own rules only."""
    policy = task.policy_overrides or None
    if task.policy_id:
        # By its id, not task.policy: the relationship keeps the old policy after an edit sets policy_id, so an edit
        # from one named policy to another read as no change and was dropped.
        policy = {"name": db.session.get(RetryPolicyRecord, task.policy_id).name, **(task.policy_overrides or {})}
    inherited = set(task.inherits or ())
    return {"name": task.name, "handler": task.handler, "params": task.params, "cron": task.cron,
            "timezone": task.timezone, "event": task.event, "policy": policy,
            **{rule: getattr(task, rule) for rule in conflict_rules.RULES if rule not in inherited},
            "jitter_s": task.jitter_s, "debounce_s": task.debounce_s, "paused": task.paused}
