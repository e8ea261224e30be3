"""Forms of the Runs area: the filters of the list and of the timeline (GET, so no CSRF); a new workflow."""

import re
import uuid
from dataclasses import replace
from datetime import UTC, datetime, time, timedelta

from wtforms import Form, HiddenField, SelectField, SelectMultipleField, StringField, TextAreaField, widgets
from wtforms.fields import DateTimeField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import Length, Optional, ValidationError

from console.domain import deleted_names, periods
from console.domain.statuses import RunStatus
from console.services import inputs
from console.services.errors import InvalidInput
from console.services.runs.query import HANDLER_WITHOUT_TASK, LATE_NEEDS_TASK, RunFilters
from console.web.forms import ConsoleForm

TIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"]
# The page writes times as 2026-12-01 14:05 (UTC); the inputs show and take the same, not the browser's locale.
SHOWN_TIME = "%Y-%m-%d %H:%M"
TIME_HINT = "YYYY-MM-DD HH:MM"
# A date alone, as Reports takes it: the whole day (its only format without a colon).
DAY = "%Y-%m-%d"
# The years Reports and the DLQ take too (periods.EARLIEST..LATEST): they keep the Gantt's window (an hour around a
# time) and a date's end (the next midnight) inside what a datetime holds.
EARLIEST = datetime.combine(periods.EARLIEST, time())
LATEST = datetime.combine(periods.LATEST, time()) + timedelta(days=1)  # exclusive: the whole last day is in
PAGE_SIZES = (25, 50, 100, 200)
FORM_KEY = re.compile(r"[0-9a-f]{32}")  # what the submit form is shown with (uuid4().hex)
DEFAULT_PAGE_SIZE = 50


class IsoTimeField(DateTimeField):
    """A UTC time typed as the page shows times (2026-12-01 14:05); the ISO 'T' form, seconds and a date alone too."""

    # A text box, not <input type="datetime-local">: that one shows the browser's locale (12/01/2026, 02:05 PM).
    widget = widgets.TextInput()

    def __init__(self, label=None, validators=None, *, day_end: bool = False, **kwargs):
        day_means = "through that day" if day_end else "from that day's start"
        super().__init__(label, validators, format=[SHOWN_TIME, *TIME_FORMATS, DAY],
                         invalid_value_message=f"is a UTC time written {TIME_HINT}, e.g. 2026-12-01 14:05, "
                                               "or a date alone (2026-12-01)",
                         render_kw={"placeholder": TIME_HINT, "autocomplete": "off", "size": 16,
                                    "title": f"UTC, written {TIME_HINT}, or YYYY-MM-DD alone: {day_means}"}, **kwargs)
        # The bound this field sets is exclusive: a date alone stands for the next midnight, so the day counts whole.
        self.day_end = day_end
        self.day = None

    def process_formdata(self, valuelist):
        typed = " ".join(valuelist).strip()
        super().process_formdata([typed] if valuelist else valuelist)
        if self.data is None:
            return
        if not EARLIEST <= self.data < LATEST:
            self.data = None
            raise ValueError(f"is a UTC time between {EARLIEST.year} and {LATEST.year - 1}")
        if ":" not in typed:
            self.day = self.data.date()
            if self.day_end:
                self.data += timedelta(days=1)

    def _value(self):
        # What was typed, back as the page writes it (a link's 2026-12-01T14:05 too); a typo is shown as typed.
        if self.day is not None:
            return self.day.strftime(DAY)
        return self.data.strftime(SHOWN_TIME) if self.data else super()._value()


class StatusChecks(SelectMultipleField):
    """Statuses as a row of checkboxes."""

    widget = widgets.ListWidget(prefix_label=False)
    option_widget = widgets.CheckboxInput()


def _stripped(value):
    # Optional() ends a field's checks on blanks, so "  " must arrive as "": it would pass for a task id otherwise.
    return value.strip() if isinstance(value, str) else value


class TimelineFilterForm(Form):
    # Checked by validate_tenant, which names the tenant instead of WTForms' "Not a valid choice". A tenant-limited
    # person naming another tenant is refused before the form (tenants.keep_within), as on the DLQ.
    tenant = SelectField("Tenant", choices=[], validators=[Optional()], validate_choice=False, filters=[_stripped])
    # Checked by validate_task: another tenant's task reads as no task at all, so its existence is not told.
    task = SelectField("Task", choices=[], validators=[Optional()], validate_choice=False, filters=[_stripped])
    status = StatusChecks("Status", choices=[SelectChoice(s.value, s.value.replace("_", " ")) for s in RunStatus],
                          validators=[Optional()])
    created_from = IsoTimeField("Created from (UTC)", validators=[Optional()])
    created_to = IsoTimeField("Created to (UTC)", validators=[Optional()], day_end=True)

    def fill_choices(self, tenants, tasks) -> None:
        """Offer the tenants and tasks this person may see."""
        self.tenant.choices = [SelectChoice("", "all tenants")] + [SelectChoice(t.name) for t in tenants]
        self.task.choices = [SelectChoice("", "all tasks")] + [
            SelectChoice(str(t.id), f"{t.tenant.name} / {deleted_names.shown(t.name)}")
            for t in tasks]

    def validate_tenant(self, field) -> None:
        names = [choice.value for choice in field.choices if choice.value]
        if field.data and field.data not in names:
            raise ValidationError(f"no tenant is named {field.data!r}")

    def validate_task(self, field) -> None:
        ids = [choice.value for choice in field.choices if choice.value]
        if field.data and field.data not in ids:
            raise ValidationError(f"no task with id {field.data[:40]} that you can see")

    def validate(self, extra_validators=None) -> bool:
        ok = super().validate(extra_validators)
        if ok and self.created_from.data and self.created_to.data and self.created_to.data <= self.created_from.data:
            self.created_to.errors.append("must be after 'created from'")
            ok = False
        return ok

    def filters(self, tenant_ids: dict[str, int]) -> RunFilters:
        """Turn valid input into RunFilters (an unknown tenant name matches nothing)."""
        tenant = self.tenant.data or ""
        return RunFilters(
            tenant_id=tenant_ids.get(tenant, -1) if tenant else None,
            task_id=int(self.task.data) if self.task.data else None,
            statuses=tuple(self.status.data or ()),
            created_from=_utc(self.created_from.data), created_to=_utc(self.created_to.data),
        )

    ALIASES: dict[str, str] = {}  # another name a field is asked for by in a URL

    def query_args(self) -> dict:
        """Return the filters as query-string arguments (for links that keep them), empty ones left out."""
        args = {}
        for name, field in self._fields.items():
            raw = field.raw_data or []
            values = [v for v in raw if v]
            if values:
                args[name] = values if isinstance(field, SelectMultipleField) else values[0]
        return args


class RunFilterForm(TimelineFilterForm):
    # The DLQ's filter and the API call it `code`: a Runs URL written that way was ignored and listed every run.
    ALIASES = {"code": "error_code"}
    error_code = StringField("Error code", validators=[Optional(), Length(max=80)])
    q = StringField("Text", validators=[Optional(), Length(max=200)])
    # The selector shows what the page shows: with none chosen, DEFAULT_PAGE_SIZE.
    per_page = SelectField("Per page", choices=[SelectChoice(str(n)) for n in PAGE_SIZES], validators=[Optional()],
                           default=str(DEFAULT_PAGE_SIZE), invalid_choice_message=(
                               f"show {', '.join(map(str, PAGE_SIZES[:-1]))} or {PAGE_SIZES[-1]} runs per page"))

    # Set by the Reports page's links, shown as removable notes rather than boxes: a handler's name; "1" or nothing.
    handler = HiddenField("Handler", validators=[Optional(), Length(max=120)])
    failed = HiddenField("A series failed")
    retried = HiddenField("First series failed")
    late = HiddenField("Started late")
    duplicated = HiddenField("Succeeded twice")
    conflicted = HiddenField("Held back by a conflict")
    ended_from = IsoTimeField("Ended from (UTC)", validators=[Optional()])
    series_from = IsoTimeField("A series ended from (UTC)", validators=[Optional()])
    series_to = IsoTimeField("A series ended before (UTC)", validators=[Optional()])

    def page_size(self) -> int:
        """Return the page size chosen (a value not offered is refused by validation)."""
        # Optional() takes a value of spaces for none and leaves it: "per_page= " was a 500 (helper 155).
        chosen = (self.per_page.data or "").strip()
        return int(chosen) if chosen else DEFAULT_PAGE_SIZE

    def validate_handler(self, field) -> None:
        if field.data and self.task.data:
            raise ValidationError(HANDLER_WITHOUT_TASK)

    def validate_late(self, field) -> None:
        if field.data and not self.task.data:
            raise ValidationError(LATE_NEEDS_TASK)

    def filters(self, tenant_ids: dict[str, int]) -> RunFilters:
        return replace(super().filters(tenant_ids), error_code=(self.error_code.data or "").strip(),
                       text=(self.q.data or "").strip(), handler=(self.handler.data or "").strip(),
                       failed=bool(self.failed.data), retried=bool(self.retried.data),
                       late=bool(self.late.data), duplicated=bool(self.duplicated.data),
                       conflicted=bool(self.conflicted.data), ended_from=_utc(self.ended_from.data),
                       series_from=_utc(self.series_from.data), series_to=_utc(self.series_to.data))


def _utc(moment):
    return moment.replace(tzinfo=UTC) if moment is not None else None


class WorkflowForm(ConsoleForm):
    """Submit a workflow: the steps are the JSON list the API takes, and the service checks them the same way."""

    name = StringField("Name")
    tenant = SelectField("Tenant", choices=[], validate_choice=False)
    steps = TextAreaField("Steps (JSON list)")
    # Made when the form is shown: submitting it twice (a double click, a resend) is one workflow.
    idempotency_key = HiddenField()

    def steps_value(self):
        """Return the steps as JSON values; raise InvalidInput naming the field when the text is not JSON."""
        text = (self.steps.data or "").strip()
        try:
            return inputs.json_text(text, "steps") if text else []
        except ValueError as error:
            raise InvalidInput(str(error), "steps") from None

    def attach(self, error) -> None:
        """Show a service error under the field it names (steps[1].handler → the steps box)."""
        head = re.split(r"[.\[]", error.field or "", maxsplit=1)[0]
        (self[head].errors if head in self and head != "idempotency_key" else self.form_errors).append(error.detail)


class SubmitRunForm(ConsoleForm):
    """Submit one run by hand: what POST /worker/tasks takes, checked by the same service."""

    tenant = SelectField("Tenant", choices=[], validate_choice=False)
    handler = StringField("Handler", validators=[Length(max=120)])
    params = TextAreaField("Params (JSON object)")
    policy = SelectField("Retry policy", choices=[], validate_choice=False, default="")
    idempotency_key = StringField("Idempotency key (optional)", validators=[Length(max=200)])
    # Made when the form is shown: submitting it twice (a double click, a resend) is one run.
    form_key = HiddenField()

    def params_value(self) -> dict:
        """Return the params as a JSON object; raise InvalidInput naming the field when they are not one."""
        text = (self.params.data or "").strip()
        try:
            value = inputs.json_text(text, "params") if text else {}
        except ValueError as error:
            raise InvalidInput(str(error), "params") from None
        if not isinstance(value, dict):
            raise InvalidInput('params must be a JSON object, e.g. {"account": 42}', "params")
        return value

    def key(self) -> str:
        """Return the idempotency key typed, else the one this form was shown with (a fresh one for a form_key no
        form was shown with: a tampered one was refused as the idempotency key, which the person had left empty)."""
        shown = self.form_key.data if FORM_KEY.fullmatch(self.form_key.data or "") else uuid.uuid4().hex
        return (self.idempotency_key.data or "").strip() or f"console:{shown}"

    def attach(self, error) -> None:
        """Show a service error under the field it names (policy.max_attempts → the policy picker)."""
        head = re.split(r"[.\[]", error.field or "", maxsplit=1)[0]
        target = head if head in self and head not in ("form_key", "csrf_token") else None
        (self[target].errors if target else self.form_errors).append(error.detail)
