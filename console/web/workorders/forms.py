"""Forms of the Work orders area."""

from flask_wtf import FlaskForm
from wtforms import SelectField, TextAreaField
from wtforms.validators import DataRequired

from console.web.notes import note_length


class AssignForm(FlaskForm):
    user = SelectField("Assign to", choices=[], validators=[DataRequired(message="pick a person")])


class CloseForm(FlaskForm):
    note = TextAreaField("What was done", validators=[
        DataRequired(message="say what was done: a note is required to close a work order"), note_length("note")])
