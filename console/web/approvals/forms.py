"""Forms of the Approvals area: approve with an optional note, reject with a required one, roll back, withdraw."""

from flask_wtf import FlaskForm
from wtforms import TextAreaField
from wtforms.validators import DataRequired, Optional

from console.web.notes import note_length


class ApproveForm(FlaskForm):
    note = TextAreaField("Note (optional)", validators=[Optional(), note_length("note")])


class RejectForm(FlaskForm):
    note = TextAreaField("Why not", validators=[
        DataRequired(message="say why in a note: the requester reads it"), note_length("note")])


class RollbackForm(FlaskForm):
    note = TextAreaField("Why roll back (optional)", validators=[Optional(), note_length("note")])


class WithdrawForm(FlaskForm):
    note = TextAreaField("Why withdraw (optional)", validators=[Optional(), note_length("note")])
