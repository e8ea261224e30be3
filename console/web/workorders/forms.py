"""Forms of the Work orders area."""

from wtforms import SelectField, TextAreaField
from wtforms.validators import DataRequired

from console.web.forms import ConsoleForm
from console.web.notes import note_length


class AssignForm(ConsoleForm):
    # No DataRequired: its "required" made the browser refuse "nobody", so a work order could not be unassigned.
    user = SelectField("Assign to", choices=[])


class CloseForm(ConsoleForm):
    note = TextAreaField("What was done", validators=[
        DataRequired(message="say what was done: a note is required to close a work order"), note_length("note")])


class NoteForm(ConsoleForm):
    note = TextAreaField("Add a note", validators=[
        DataRequired(message="write the note: what you tried, found or hand over"), note_length("note")])
