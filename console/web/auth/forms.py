"""Login form."""

from wtforms import PasswordField, StringField
from wtforms.validators import DataRequired, Length

from console.web.forms import ConsoleForm


class LoginForm(ConsoleForm):
    username = StringField("Username", validators=[DataRequired(), Length(max=64)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=256)])
