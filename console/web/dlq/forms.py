"""Forms of the DLQ area."""

from wtforms import BooleanField, IntegerField, StringField, TextAreaField
from wtforms.validators import DataRequired, InputRequired, NumberRange, ValidationError

from console.services import inputs
from console.services.dlq.bulk import DEFAULT_RATE, MAX_RATE
from console.services.inputs import MAX_PARAMS_BYTES
from console.web.forms import ConsoleForm
from console.web.notes import note_length


class DiscardForm(ConsoleForm):
    reason = StringField("Reason", validators=[
        DataRequired(message="say why: a reason is required to discard"), note_length("reason")])


RATE_RULE = f"the rate is a whole number of runs per second, from 1 to {MAX_RATE}"


class BulkReplayForm(ConsoleForm):
    # One rule, whatever is wrong (nothing, a word, a fraction, too many): the view says it once.
    rate = IntegerField("Rate (runs/s)", default=DEFAULT_RATE, invalid_value_message=RATE_RULE,
                        validators=[InputRequired(message=RATE_RULE), NumberRange(1, MAX_RATE, message=RATE_RULE)])
    # Beside the rate: no pacing, one transaction per chunk; the workers still keep each policy's limits.
    fastest = BooleanField("As fast as it safely can")


class FixParamsForm(ConsoleForm):
    """A dead letter's run, replayed with new params once a second person approves."""

    params = TextAreaField("New params (JSON)", validators=[DataRequired(message="give the params as a JSON object")])
    reason = TextAreaField("Reason", validators=[
        DataRequired(message="give a reason: the approver reads it before deciding"), note_length("reason")])

    def validate_params(self, field) -> None:
        if len(field.data.encode()) > MAX_PARAMS_BYTES:
            raise ValidationError(f"params are larger than {MAX_PARAMS_BYTES // 1024} KB")
        try:
            parsed = inputs.json_text(field.data)
        except ValueError as error:
            raise ValidationError(str(error)) from None
        if not isinstance(parsed, dict):
            raise ValidationError('params must be a JSON object, e.g. {"account": 42}')
        self.parsed_params = parsed
