"""A runbook's form, built from its declared parameters: one WTForms field per parameter, errors at the field."""

import contextlib
from datetime import datetime

from wtforms import (
    BooleanField,
    FloatField,
    IntegerField,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.fields.choices import SelectChoice
from wtforms.validators import Optional

from console.domain.runbooks import NOUNS, Param
from console.domain.runbooks import ParamType as T
from console.web.forms import ConsoleForm
from console.web.notes import note_length
from console.web.runs.forms import IsoTimeField

LONG_TEXT = 500  # text parameters allowed longer than this get a text area
MAX_PREFILL_CHARS = 2_000  # what a link may fill in; longer is cut, not refused (the form is checked on submit)


class RunbookForm(ConsoleForm):
    """The fields every runbook form has; the declared ones are added by form_for."""

    reason = TextAreaField("Reason", validators=[Optional(), note_length("reason")])


class ExecutionRunForm(ConsoleForm):
    """Run for real what a dry-run showed, with the same params."""

    reason = TextAreaField("Reason", validators=[Optional(), note_length("reason")])


class NumberField(FloatField):
    """A number box that shows a whole default as 50, not WTForms' 50.0."""

    def _value(self):
        if self.raw_data:
            return self.raw_data[0]
        if self.data is None:
            return ""
        # A link's prefill is text ("5.0", "2.5", "lots"): int("5.0") was a 500, and "2.5" showed as '2.5'.
        try:
            number = float(self.data)
        except (TypeError, ValueError):
            return str(self.data)
        return str(int(number)) if number.is_integer() else repr(number)


def _label(param: Param) -> str:
    return param.label + ("" if param.required else " (optional)")


def _field(param: Param):
    """Return the unbound WTForms field for one parameter; the domain's parse still decides what is valid."""
    options = {"label": _label(param), "description": param.help, "validators": [Optional()]}
    kind = param.type
    if kind is T.BOOL:
        return BooleanField(param.label, description=param.help, default=bool(param.default))
    # Whole numbers and choices are checked by the domain's parse alone, as the API's and the CLI's are: WTForms
    # refused 5.0 that the API takes, and said "Not a valid choice." without naming the choices (helper 125).
    if kind is T.CHOICE:
        return SelectField(choices=[SelectChoice(value) for value in param.choices], default=param.default,
                           validate_choice=False, **options)
    if kind is T.INT:
        options["render_kw"] = {"inputmode": "numeric"}
        return StringField(default=None if param.default is None else str(param.default), **options)
    if kind is T.FLOAT:
        return NumberField(default=param.default, invalid_value_message="is a number, e.g. 2.5", **options)
    if kind is T.DATETIME:
        options["label"] += ", UTC"
        return IsoTimeField(**options)  # typed as every time input in the console (2026-12-01 14:05)
    if param.reference:
        noun = NOUNS[kind]
        what = f"{noun} ids" if param.many else f"{noun} id"
        options["label"] = f"{param.label} ({what}{'' if param.required else ', optional'})"
        if not param.many:
            options["invalid_value_message"] = f"is a {noun} id: a whole number"
        return (StringField if param.many else IntegerField)(**options)
    # The box holds what the domain's parse takes (a resolve's note: the one limit of a note).
    options["render_kw"] = {"maxlength": param.max_length}
    if param.shown_default != param.default:  # a secret-named default: kept when the box is left empty, never shown
        options["render_kw"]["placeholder"] = "*** (its default, kept when left empty)"
        return StringField(**options)
    if param.max_length > LONG_TEXT:
        return TextAreaField(default=param.default, **options)
    return StringField(default=param.default, **options)


def form_for(runbook, *, tenants: list[str] | None, formdata=None, data=None) -> RunbookForm:
    """Build the runbook's form: its declared fields in order, a tenant choice for unscoped people, a reason."""
    fields = {param.name: _field(param) for param in runbook.params}
    if tenants is not None:
        fields["tenant"] = SelectField("Tenant", choices=[SelectChoice("", "every tenant")]
                                       + [SelectChoice(name) for name in tenants], default="")
    form_class = type(f"{runbook.name.title().replace('_', '')}Form", (RunbookForm,), fields)
    return form_class(formdata=formdata, data=data) if formdata is not None else form_class(data=data)


def prefill(runbook, args) -> dict:
    """Return what a link fills in (DLQ → resolve_runs?runs=35): declared params, the tenant and the reason."""
    found = {}
    for param in runbook.params:
        value = str(args.get(param.name) or "").strip()[:MAX_PREFILL_CHARS]
        if not value:
            continue
        if param.type is T.BOOL:
            found[param.name] = value.lower() in ("1", "true", "on", "yes")
        elif param.type is T.DATETIME:
            with contextlib.suppress(ValueError):
                found[param.name] = datetime.fromisoformat(value).replace(tzinfo=None)
        else:
            found[param.name] = value  # a bad number is marked at its field, as if it had been typed
    for name in ("tenant", "reason"):
        if args.get(name):
            found[name] = str(args[name])[:MAX_PREFILL_CHARS]
    return found


def raw_params(runbook, form: RunbookForm) -> dict:
    """Return what the person entered, by parameter, for the domain to parse (empty fields left out)."""
    values = {}
    for param in runbook.params:
        value = form[param.name].data
        if value is not None and value != "":
            values[param.name] = value
    return values


def declared_fields(runbook, form: RunbookForm) -> list:
    return [form[param.name] for param in runbook.params]
