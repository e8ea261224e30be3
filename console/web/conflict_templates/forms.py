"""The conflict template form: plain text in, rules out; the domain validates the values."""

from wtforms import HiddenField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import Length

from console.domain import conflict_rules
from console.services import inputs
from console.services.errors import InvalidInput
from console.services.scheduling import quota_classes
from console.web.forms import ConsoleForm
from console.web.tasks.forms import CONCURRENCY_CHOICES, json_text

CODES = {"autocomplete": "off", "spellcheck": "false"}


class TemplateForm(ConsoleForm):
    name = StringField("Name", description="Lowercase letters, digits, '.', '_' or '-'; tasks refer to it.",
                       render_kw=CODES)
    description = StringField("Description", validators=[Length(max=255)],
                              description="What the rules are for, in a few words.")
    mutex_key = StringField("Mutex key", render_kw={**CODES, "class": "mono"},
                            description="Runs sharing a key are not meant to overlap. Empty for none.")
    concurrency_policy = SelectField("Concurrency policy", choices=CONCURRENCY_CHOICES, validate_choice=False,
                                     default="allow",
                                     description="What a firing does while a run with the same key is active.")
    window = TextAreaField("Execution window (JSON)", render_kw={**CODES, "rows": 3, "class": "mono"},
                           description='E.g. weekdays: {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", '
                                       '"end": "18:00", "timezone": "UTC"}. Empty for any time.')
    misfire_grace_s = StringField("Misfire grace (s)", default="300", render_kw={"inputmode": "numeric"},
                                  description="Catch up a firing missed while no scheduler ran, if at most this old.")
    sla = TextAreaField("SLA (JSON)", render_kw={**CODES, "rows": 2, "class": "mono"},
                        description='E.g. {"max_start_delay_s": 60, "deadline_s": 600}. Empty: the retry '
                                    "policy's SLA.")
    quota_class = SelectField("Quota class", choices=[], validate_choice=False, default="",
                              description="Runs of the tasks in the class share its running slots, across tasks and "
                                          "tenants. Empty for none.")
    # The version the editor started from, so a save over someone else's newer version is caught.
    base_version = HiddenField()

    RULE_FIELDS = ("mutex_key", "concurrency_policy", "window", "misfire_grace_s", "sla", "quota_class")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.quota_class.choices = [SelectChoice("", "none")] + [
            SelectChoice(record.name, f"{record.name} — {record.max_running} at once")
            for record in quota_classes.all_classes()]

    def to_rules(self) -> dict:
        """Return the rules the fields spell; a JSON box that is not JSON is a 422 naming it."""
        return {field: self._value(field) for field in self.RULE_FIELDS}

    def _value(self, field: str):
        """Return one rule's value as its field spells it."""
        if field in ("window", "sla"):
            return _json(self[field], field)
        if field == "misfire_grace_s":
            return inputs.typed_whole((self.misfire_grace_s.data or "").strip())
        if field == "concurrency_policy":
            return self.concurrency_policy.data or "allow"
        return (self[field].data or "").strip() or None  # the mutex key, the quota class

    def mark_every_refusal(self, name: str | None = None) -> bool:
        """Mark every field the save would refuse, not only the first (and `name`, for a new template); tell
        whether any was."""
        marked = False
        if name is not None:
            try:
                inputs.name(name, "template")
            except InvalidInput as error:
                self.attach("name", error.detail)
                marked = True
        for field in self.RULE_FIELDS:
            try:
                conflict_rules.check(field, self._value(field))
            except InvalidInput as error:  # a JSON box that is not JSON
                self.attach(field, error.detail)
                marked = True
            except conflict_rules.RuleError as error:
                self.attach(error.field, error.message)
                marked = True
        return marked

    def fill(self, rules: dict) -> None:
        """Put stored rules into the fields."""
        self.mutex_key.data = rules.get("mutex_key") or ""
        self.concurrency_policy.data = rules.get("concurrency_policy") or "allow"
        self.window.data, self.sla.data = json_text(rules.get("window")), json_text(rules.get("sla"))
        self.misfire_grace_s.data = str(rules.get("misfire_grace_s", 300))
        self.quota_class.data = rules.get("quota_class") or ""

    def attach(self, error_field: str | None, message: str) -> None:
        """Show a service error under the field it names ("rules.window.start" → window)."""
        head = (error_field or "").removeprefix("rules.").split(".", 1)[0]
        if head in self and head != "csrf_token":
            self[head].errors = [*self[head].errors, message]
        else:
            self.form_errors.append(message)


def _json(field, label: str):
    text = (field.data or "").strip()
    if not text:
        return None
    try:
        return inputs.json_text(text, label)
    except ValueError as error:
        raise InvalidInput(str(error), label) from None
