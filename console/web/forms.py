"""The console's form base: a field refused by the server names its error for assistive technology."""

import re

from flask_wtf import FlaskForm
from wtforms.fields import DecimalField, FloatField, IntegerField
from wtforms.validators import NumberRange

# A number as people type it on any keyboard, in ASCII digits: Python's int() and float() also take other scripts'
# digits (٣٠٠ was saved as 300) and underscores (1_0 as 10), which nobody meant.
PLAIN_NUMBER = re.compile(r"\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*", re.ASCII)


class ConsoleForm(FlaskForm):
    """A FlaskForm whose refused fields render aria-invalid and point at their error (templates' `ui.errors`), and
    whose number fields take ASCII digits only."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in self:
            typed = (field.raw_data or [""])[0] if isinstance(field, IntegerField | FloatField | DecimalField) else ""
            if typed.strip() and not PLAIN_NUMBER.fullmatch(typed) and not field.process_errors:
                field.data = None
                field.process_errors.append(field.invalid_value_message or "enter a number in the digits 0-9")
            elif (isinstance(field, IntegerField) and isinstance(field.data, int) and abs(field.data) >= 10**18
                  and any(isinstance(check, NumberRange) for check in field.validators)):
                # Past a float's range, NumberRange's math.isnan raised OverflowError: a 500. (A field without one,
                # a runbook's id, is the domain's to refuse, with its own words.)
                field.data = None
                field.process_errors.append(field.invalid_value_message or "a whole number of at most 18 digits")

    class Meta(FlaskForm.Meta):
        def render_field(self, field, render_kw):
            if field.errors:
                # A field described by its help text too is described by both: the error first.
                described = " ".join(filter(None, (f"{field.id}-error", render_kw.pop("aria-describedby", None),
                                                   render_kw.pop("aria_describedby", None))))
                render_kw = {**render_kw, "aria-invalid": "true", "aria-describedby": described}
            return super().render_field(field, render_kw)
