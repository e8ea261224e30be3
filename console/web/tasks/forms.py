"""The task form: its fields become the same JSON body the task API takes, and the service validates it."""

import json
from datetime import datetime

from wtforms import BooleanField, HiddenField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice

from console.services import inputs
from console.services.errors import InvalidInput
from console.services.scheduling.tasks import CONCURRENCY_POLICIES
from console.web.forms import ConsoleForm

DEFAULT_POLICY = "default"
_CONCURRENCY_HINTS = {"allow": "runs may overlap", "forbid": "skip a firing while one runs",
                      "replace": "cancel the running one"}
CONCURRENCY_CHOICES = [SelectChoice(p, f"{p} — {_CONCURRENCY_HINTS.get(p, p)}") for p in CONCURRENCY_POLICIES]
# The rules a conflict template may supply: an empty field takes the template's value.
RULE_FIELDS = ("mutex_key", "concurrency_policy", "window", "misfire_grace_s", "sla", "quota_class")
# What an empty rule field means for a task without a template (the built-in values).
EMPTY_RULE = {"mutex_key": None, "concurrency_policy": "allow", "window": None, "misfire_grace_s": 300, "sla": None,
              "quota_class": None}
# Typed into a rule that may be "none" (or chosen, for the quota class): none, set by the task itself, whatever its
# template says. An empty field takes the template's instead.
OWN_NONE = "-"
NONE_RULES = ("mutex_key", "window", "sla", "quota_class")
_SET_NONE = object()


def _json(field, label: str, empty):
    """Read a JSON textarea; an empty one means `empty`."""
    text = (field.data or "").strip()
    if not text:
        return empty
    try:
        return inputs.json_text(text, label)
    except ValueError as error:
        raise InvalidInput(str(error), field.name) from None


def _text(field) -> str | None:
    text = (field.data or "").strip()
    return text or None


def _whole(field):
    """Return the number typed, or the text itself so the service says what a valid value is."""
    text = (field.data or "").strip()
    return inputs.typed_whole(text)


def json_text(value) -> str:
    """Show a stored JSON value in a textarea: nothing for an empty one, one line when it is short."""
    if value in (None, {}, []):
        return ""
    line = json.dumps(value, ensure_ascii=False)
    return line if len(line) <= 140 else json.dumps(value, indent=2, ensure_ascii=False)


class TaskForm(ConsoleForm):
    """Edit a task. Choices are not checked here: the service checks them, as it does for the API."""

    name = StringField("Name")
    handler = StringField("Handler")
    params = TextAreaField("Params (JSON object)")
    cron = StringField("Cron expression")
    timezone = StringField("Time zone", default="UTC")
    event = StringField("Event name")
    policy = SelectField("Retry policy", choices=[], validate_choice=False, default="")
    policy_overrides = TextAreaField("Policy overrides (JSON)")
    template = SelectField("Conflict template", choices=[], validate_choice=False, default="")
    mutex_key = StringField("Mutex key")
    concurrency_policy = SelectField("Concurrency policy", validate_choice=False, default="",
                                     choices=[SelectChoice("", "from the template (allow without one)"),
                                              *CONCURRENCY_CHOICES])
    window = TextAreaField("Execution window (JSON)")
    jitter_s = StringField("Jitter (s)", default="0")
    debounce_s = StringField("Debounce (s)", default="0")
    misfire_grace_s = StringField("Misfire grace (s)", default="")
    sla = TextAreaField("SLA (JSON)")
    quota_class = SelectField("Quota class", choices=[], validate_choice=False, default="")
    # When the task was last saved as this form was filled: a save over someone's later change is refused.
    seen = HiddenField()

    def seen_at(self) -> datetime | None:
        """Return the task's updated_at the form was filled from (None: not given, as by a script: no check); one
        the page did not write is refused (it skipped the check, and the save went over a later change)."""
        given = (self.seen.data or "").strip()
        if not given:
            return None
        try:
            seen = datetime.fromisoformat(given[:40])
        except ValueError:
            seen = None
        if seen is None or seen.tzinfo is None:  # the page writes an aware time; anything else was edited
            raise InvalidInput("this form's time of the task as you opened it is not one the page wrote; reload the "
                               "page and make your change again", "seen")
        return seen

    def fill(self, snapshot: dict) -> None:
        """Put a task's current definition (tasks.snapshot) into the fields."""
        policy = snapshot.get("policy")
        name, overrides = "", {}
        if isinstance(policy, str):
            name = policy
        elif isinstance(policy, dict):
            overrides = dict(policy)
            name = overrides.pop("name", "") or ""
        self.name.data, self.handler.data = snapshot["name"], snapshot["handler"]
        self.params.data = json_text(snapshot.get("params"))
        self.cron.data, self.timezone.data = snapshot.get("cron") or "", snapshot.get("timezone") or "UTC"
        self.event.data, self.mutex_key.data = snapshot.get("event") or "", snapshot.get("mutex_key") or ""
        self.policy.data = "" if name == DEFAULT_POLICY else name
        self.policy_overrides.data = json_text(overrides)
        self.concurrency_policy.data = snapshot.get("concurrency_policy") or "allow"
        self.window.data, self.sla.data = json_text(snapshot.get("window")), json_text(snapshot.get("sla"))
        for key in ("jitter_s", "debounce_s", "misfire_grace_s"):
            self[key].data = str(snapshot[key])
        self.template.data = snapshot.get("template") or ""
        self.quota_class.data = snapshot.get("quota_class") or ""
        inherited = set(snapshot.get("inherit") or ())
        for rule in inherited:
            # Inherited: left empty, so the template's next version reaches this task too.
            self[rule].data = ""
        if snapshot.get("template"):
            # "None" set by the task itself reads as such, so saving the form unchanged keeps it, not the template's.
            for rule in NONE_RULES:
                if rule not in inherited and snapshot.get(rule) is None:
                    self[rule].data = OWN_NONE

    def to_body(self) -> tuple[dict, list[InvalidInput]]:
        """Return the request body the task API would receive, and a refusal per JSON box that is not JSON (read as
        empty, so the service still checks every other field)."""
        unread: list[InvalidInput] = []

        def box(field, label: str, empty):
            try:
                return _json(field, label, empty)
            except InvalidInput as error:
                unread.append(error)
                return empty

        overrides = box(self.policy_overrides, "policy overrides", {})
        if not isinstance(overrides, dict):
            unread.append(InvalidInput("policy overrides must be a JSON object such as {\"max_attempts\": 5}",
                                       "policy_overrides"))
            overrides = {}
        name = self.policy.data or None
        policy = {**overrides, "name": name} if overrides and name else overrides or name
        body = {
            "name": (self.name.data or "").strip(), "handler": (self.handler.data or "").strip(),
            "params": box(self.params, "params", {}), "cron": _text(self.cron),
            "timezone": _text(self.timezone) or "UTC", "event": _text(self.event), "policy": policy or None,
            "jitter_s": _whole(self.jitter_s), "debounce_s": _whole(self.debounce_s),
            "template": self.template.data or None,
        }
        def own_none(field, read):
            return _SET_NONE if (field.data or "").strip() == OWN_NONE else read()

        rules = {"mutex_key": own_none(self.mutex_key, lambda: _text(self.mutex_key)),
                 "concurrency_policy": self.concurrency_policy.data or None,
                 "window": own_none(self.window, lambda: box(self.window, "window", None)),
                 "sla": own_none(self.sla, lambda: box(self.sla, "sla", None)),
                 "misfire_grace_s": _whole(self.misfire_grace_s) if _text(self.misfire_grace_s) else None,
                 "quota_class": own_none(self.quota_class, lambda: self.quota_class.data or None)}
        inherit = [rule for rule in RULE_FIELDS if rules[rule] is None]
        rules = {rule: None if value is _SET_NONE else value for rule, value in rules.items()}
        if body["template"]:
            # An empty rule field takes the template's value; "-" is none, the task's own.
            body["inherit"] = inherit
            body.update({rule: value for rule, value in rules.items() if rule not in inherit})
        else:
            body.update({rule: EMPTY_RULE[rule] if value is None else value for rule, value in rules.items()})
        return body, unread

    def attach(self, error) -> None:
        """Show a service error under the field it names (policy.max_attempts → the overrides box)."""
        field = error.field or ""
        head = field.split(".", 1)[0]
        if field in ("policy", "policy.name"):
            target = "policy"
        elif head == "policy":
            target = "policy_overrides"
        else:
            target = head if head in self and head != "seen" else None  # a hidden field: said above the form
        (self[target].errors if target else self.form_errors).append(error.detail)


class NewTaskForm(TaskForm):
    """Register a task: the edit form plus its tenant and whether it starts paused."""

    tenant = SelectField("Tenant", choices=[], validate_choice=False)
    paused = BooleanField("Start paused")

    def to_body(self) -> tuple[dict, list[InvalidInput]]:
        body, unread = super().to_body()
        return {**body, "paused": bool(self.paused.data)}, unread


def template_choices(names: list[str]) -> list[SelectChoice]:
    """Return the conflict template options, none first."""
    return [SelectChoice("", "none — the task sets every rule")] + [SelectChoice(n) for n in names]


def quota_class_choices(names: list[str]) -> list[SelectChoice]:
    """Return the quota class options: empty takes the template's (none without one), "-" none whatever it says."""
    return ([SelectChoice("", "from the template (none without one)"),
             SelectChoice(OWN_NONE, "none, whatever the template")] + [SelectChoice(n) for n in names])


def policy_choices(names: list[str]) -> list[SelectChoice]:
    """Return the retry policy options, `default` first."""
    return [SelectChoice("", DEFAULT_POLICY)] + [SelectChoice(n) for n in names if n != DEFAULT_POLICY]
