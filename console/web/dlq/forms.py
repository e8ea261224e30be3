"""Forms of the DLQ area."""

from flask_wtf import FlaskForm
from wtforms import IntegerField, StringField
from wtforms.validators import DataRequired, InputRequired, Length, NumberRange

from console.services.dlq.bulk import DEFAULT_RATE, MAX_RATE
from console.services.dlq.groups import MAX_REASON_CHARS


class DiscardForm(FlaskForm):
    reason = StringField("Reason", validators=[
        DataRequired(message="say why: a reason is required to discard"), Length(max=MAX_REASON_CHARS)])


class BulkReplayForm(FlaskForm):
    rate = IntegerField("Rate (runs/s)", default=DEFAULT_RATE, validators=[
        InputRequired(message="set a rate in runs per second"),
        NumberRange(1, MAX_RATE, message=f"the rate must be between 1 and {MAX_RATE} runs per second")])
