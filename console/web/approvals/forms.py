"""Forms of the Approvals area: approve with an optional note, reject with a required one, roll back."""

from flask_wtf import FlaskForm
from wtforms import TextAreaField
from wtforms.validators import DataRequired, Length, Optional

from console.services.recovery.decisions import MAX_NOTE_CHARS

TOO_LONG = f"keep the note under {MAX_NOTE_CHARS} characters"


class ApproveForm(FlaskForm):
    note = TextAreaField("Note (optional)", validators=[Optional(), Length(max=MAX_NOTE_CHARS, message=TOO_LONG)])


class RejectForm(FlaskForm):
    note = TextAreaField("Why not", validators=[
        DataRequired(message="say why in a note: the requester reads it"),
        Length(max=MAX_NOTE_CHARS, message=TOO_LONG)])


class RollbackForm(FlaskForm):
    note = TextAreaField("Why roll back (optional)", validators=[
        Optional(), Length(max=MAX_NOTE_CHARS, message=TOO_LONG)])
