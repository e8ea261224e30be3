"""Forms of the Approvals area: approve with an optional note, reject with a required one, roll back, withdraw."""

from wtforms import TextAreaField
from wtforms.validators import DataRequired, Optional

from console.web.forms import ConsoleForm
from console.web.notes import note_length


class ApproveForm(ConsoleForm):
    note = TextAreaField("Note (optional)", validators=[Optional(), note_length("note")])


class RejectForm(ConsoleForm):
    note = TextAreaField("Why not", validators=[
        DataRequired(message="say why in a note: the requester reads it"), note_length("note")])


class RollbackForm(ConsoleForm):
    note = TextAreaField("Why roll back (optional)", validators=[Optional(), note_length("note")])


class WithdrawForm(ConsoleForm):
    note = TextAreaField("Why withdraw (optional)", validators=[Optional(), note_length("note")])
