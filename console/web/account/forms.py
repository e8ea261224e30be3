"""A person's own password change."""

from wtforms import PasswordField
from wtforms.validators import DataRequired, EqualTo, Length

from console.web.forms import ConsoleForm


class ChangePasswordForm(ConsoleForm):
    current = PasswordField("Current password", validators=[DataRequired(), Length(max=256)])
    password = PasswordField("New password", validators=[DataRequired(), Length(max=256)])
    repeat = PasswordField("New password again", validators=[
        DataRequired(), EqualTo("password", message="the two new passwords differ; type the same one twice")])
