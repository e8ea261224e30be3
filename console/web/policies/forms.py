"""The policy form: plain text in, a spec out; the domain validates the values."""

import math
import re

from wtforms import HiddenField, SelectField, StringField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import Length

from console.services.inputs import typed_whole
from console.web.forms import ConsoleForm

NUMBER = {"type": "number", "step": "any", "inputmode": "decimal", "autocomplete": "off"}
CODES = {"autocomplete": "off", "spellcheck": "false"}


def _number(label: str, description: str) -> StringField:
    # No WTForms validators: RetryPolicy is the one place that says what a good value is.
    return StringField(label, description=description, render_kw=NUMBER)


class PolicyForm(ConsoleForm):
    name = StringField("Name", description="Lowercase letters, digits, '.', '_' or '-'; tasks refer to it.",
                       render_kw={"autocomplete": "off", "spellcheck": "false"})
    description = StringField("Description", validators=[Length(max=255)],
                              description="What the policy is for, in a few words.")
    max_attempts = _number("Max attempts", "Attempts in all, the first included (1-100).")
    base_delay_s = _number("Base delay (s)", "Wait after the first failed attempt.")
    multiplier = _number("Multiplier", "Each wait is the previous one times this (1-10).")
    max_delay_s = _number("Max delay (s)", "Cap on any one wait.")
    jitter = _number("Jitter (±)", "Random spread as a fraction of the wait: 0.2 is ±20%.")
    timeout_s = _number("Attempt timeout (s)", "An attempt running longer is stopped and retried.")
    concurrency = _number("Concurrency", "Attempts of one task running at once.")
    queue_limit = _number("Queue limit", "Runs waiting per task before new ones are refused.")
    retryable_codes = StringField("Retryable codes", render_kw=CODES,
                                  description="Comma-separated; these error codes are always retried.")
    non_retryable_codes = StringField("Non-retryable codes", render_kw=CODES,
                                      description="Comma-separated; these fail at once, e.g. http_400, http_404.")
    breaker_failure_threshold = _number("Opens after failures", "Consecutive failures of a handler that open it.")
    breaker_open_s = _number("Stays open (s)", "Calls are held back this long, then one probe goes.")
    breaker_success_threshold = _number("Closes after successes", "Successful probes needed to close it again.")
    # validate_choice off: RetryPolicy names the allowed scopes in its message, as for every other field.
    breaker_scope = SelectField("Scope", validate_choice=False, default="handler", choices=[
        SelectChoice("handler", "All tenants"), SelectChoice("handler_and_tenant", "Per tenant")],
        description="All tenants: one breaker per handler, an outage is everyone's. Per tenant: one tenant's "
                    "failures hold only its own runs.")
    sla_max_start_delay_s = _number("Max start delay (s)", "Optional: a run must start this soon after its time.")
    sla_deadline_s = _number("Deadline (s)", "Optional: a run must succeed this soon after its time.")
    # The version the editor started from, so a save over someone else's newer version is caught.
    base_version = HiddenField()

    GROUPS = (
        ("Backoff", ("max_attempts", "base_delay_s", "multiplier", "max_delay_s", "jitter")),
        ("Limits", ("timeout_s", "concurrency", "queue_limit")),
        ("Error codes", ("retryable_codes", "non_retryable_codes")),
        ("Circuit breaker", ("breaker_failure_threshold", "breaker_open_s", "breaker_success_threshold",
                             "breaker_scope")),
        ("SLA", ("sla_max_start_delay_s", "sla_deadline_s")),
    )
    SIMPLE = ("max_attempts", "base_delay_s", "multiplier", "max_delay_s", "jitter", "timeout_s", "concurrency",
              "queue_limit")
    BREAKER = ("failure_threshold", "open_s", "success_threshold")
    SLA = ("max_start_delay_s", "deadline_s")

    def to_spec(self) -> dict:
        """Return the policy spec the fields spell, numbers parsed, codes split; values stay unchecked."""
        spec = {name: _parse_number(self[name].data) for name in self.SIMPLE}
        for name in ("retryable_codes", "non_retryable_codes"):
            spec[name] = [code.strip() for code in (self[name].data or "").split(",") if code.strip()]
        spec["breaker"] = {key: _parse_number(self[f"breaker_{key}"].data) for key in self.BREAKER}
        spec["breaker"]["scope"] = self.breaker_scope.data
        sla = {key: _parse_number(self[f"sla_{key}"].data) for key in self.SLA}
        spec["sla"] = {key: value for key, value in sla.items() if value != ""}
        return spec

    def fill(self, spec: dict) -> None:
        """Put a stored (flat) spec into the fields, numbers written without a needless '.0'."""
        for name in self.SIMPLE:
            self[name].data = _format(spec.get(name))
        for name in ("retryable_codes", "non_retryable_codes"):
            self[name].data = ", ".join(spec.get(name) or ())
        for key in self.BREAKER:
            self[f"breaker_{key}"].data = _format(spec.get(f"breaker_{key}"))
        self.breaker_scope.data = spec.get("breaker_scope", "handler")
        for key in self.SLA:
            self[f"sla_{key}"].data = _format(spec.get(key))

    def attach(self, error_field: str | None, message: str) -> None:
        """Show a service error under the field it names ("policy.breaker.open_s" → breaker_open_s)."""
        name = (error_field or "").removeprefix("policy.").replace(".", "_")
        message = self.in_words(message)
        if name in self and name != "csrf_token":
            self[name].errors = [*self[name].errors, message]
        else:
            self.form_errors.append(message)

    def in_words(self, message: str) -> str:
        """Name the fields in a domain message by their labels (max_attempts → Max attempts), as the form shows them."""
        # The domain speaks the API's keys; under a labelled box they read as code. Longest first: sla_deadline_s
        # before deadline_s.
        return _SPELLED.sub(lambda found: self[_SPELLED_AS[found.group(0)]].label.text, message)


def _spellings() -> dict[str, str]:
    """Return every way the domain spells a form field (flat, nested, SLA's bare keys) → the field's name."""
    found = {name: name for name in (*PolicyForm.SIMPLE, "retryable_codes", "non_retryable_codes", "breaker_scope")}
    for key in (*PolicyForm.BREAKER, "scope"):
        found |= {f"breaker.{key}": f"breaker_{key}", f"breaker_{key}": f"breaker_{key}"}
    for key in PolicyForm.SLA:
        found |= {f"sla.{key}": f"sla_{key}", f"sla_{key}": f"sla_{key}", key: f"sla_{key}"}
    return found


_SPELLED_AS = _spellings()
_SPELLED = re.compile("|".join(rf"(?<![\w.]){re.escape(key)}(?![\w.])"
                               for key in sorted(_SPELLED_AS, key=len, reverse=True)))


def _parse_number(text: str | None):
    """Turn '3' into 3 and '2.5' into 2.5; anything else is passed on for the domain to reject by name."""
    text = (text or "").strip()
    whole = typed_whole(text)
    if not isinstance(whole, str):
        return whole
    try:
        number = float(text) if text.isascii() else math.nan
    except ValueError:
        return text
    # float() reads what int() refuses (5,000 nines is inf): the domain says back what was typed, not "got inf".
    return number if math.isfinite(number) else text


def _format(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
