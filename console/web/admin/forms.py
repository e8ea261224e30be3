"""Forms of the Admin area."""

import re
import uuid

from wtforms import BooleanField, FloatField, HiddenField, IntegerField, PasswordField, SelectField, StringField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, InputRequired, Length, Optional, Regexp

from console.models import Role
from console.web.forms import ConsoleForm
from console.web.runs.forms import IsoTimeField

ROLE_CHOICES = [SelectChoice(r.value) for r in Role]
ISSUE_KEY = re.compile(r"[0-9a-f]{32}")


class CreateUserForm(ConsoleForm):
    username = StringField("Username", validators=[
        DataRequired(), Regexp(r"^[a-zA-Z0-9_.-]{2,64}$", message="2-64 letters, digits, '.', '_' or '-'")])
    role = SelectField("Role", choices=ROLE_CHOICES, default="viewer")
    tenant = SelectField("Tenant", choices=[], validators=[Optional()])
    password = PasswordField("Password", validators=[
        Optional(), Length(min=10, message="at least 10 characters, or leave empty to generate one")])


class UpdateUserForm(ConsoleForm):
    role = SelectField("Role", choices=ROLE_CHOICES)
    active = SelectField("Status", choices=[SelectChoice("1", "active"), SelectChoice("0", "disabled")])
    # What the row showed (role:1 or role:0): a Save from a row drawn before another admin's change is refused,
    # not written over that change. Left out (a script), the change is made over whatever holds.
    seen = HiddenField(validators=[Optional(), Regexp(r"^[a-z]+:[01]$", message="the row's role:status as drawn, "
                                                                                 "such as manager:1")])

    @classmethod
    def of(cls, user) -> "UpdateUserForm":
        """Return the row's form as the user stands now (not as a request posted it)."""
        active = "1" if user.active else "0"
        return cls(formdata=None, prefix=f"u{user.id}", role=user.role, active=active, seen=f"{user.role}:{active}")

    def seen_state(self) -> tuple[str, bool] | None:
        """Return the (role, active) the row was drawn with, or None when the form did not say."""
        if not self.seen.data:
            return None
        role, active = self.seen.data.split(":")
        return role, active == "1"


class CreateTokenForm(ConsoleForm):
    user = SelectField("User", choices=[], validators=[DataRequired("choose who the token acts as")])
    name = StringField("Name", validators=[Optional(), Length(max=80)])
    tenant = SelectField("Limited to tenant", choices=[], validators=[Optional()])
    days = SelectField("Expires", choices=[SelectChoice("", "never (until revoked)"), SelectChoice("30", "in 30 days"),
                                           SelectChoice("90", "in 90 days"), SelectChoice("365", "in a year")],
                       default="")
    # Which page's form this is: sent again (a reload of the answer), it issues no second token.
    issue_key = HiddenField()

    def key(self) -> str | None:
        """Return the form's issue key, or None when it is not one the page gave (an old page, a script)."""
        return self.issue_key.data if ISSUE_KEY.fullmatch(self.issue_key.data or "") else None

    def new_key(self) -> None:
        self.issue_key.data = uuid.uuid4().hex


def tenant_choices(tenants) -> list[SelectChoice]:
    """Return the tenant options, with 'all tenants' first."""
    return [SelectChoice("", "all tenants")] + [SelectChoice(t.name) for t in tenants]


class AlertRuleForm(ConsoleForm):
    """One rule's row: the threshold (in % for rates), the window in seconds, on or off."""

    threshold = FloatField("Threshold", invalid_value_message="enter a number, e.g. 5 or 2.5",
                           validators=[InputRequired(message="enter a number")])
    window_s = IntegerField("Window, seconds", invalid_value_message="a whole number of seconds, e.g. 300",
                            validators=[Optional()])
    enabled = SelectField("Status", choices=[SelectChoice("1", "on"), SelectChoice("0", "off")])


class ChannelForm(ConsoleForm):
    """One channel's console settings; a blank URL or secret keeps what is set, 'forget' falls back to the env."""

    # The same words as the service's limits (targets.save), whichever of the two refuses first.
    url = StringField("URL", validators=[Optional(), Length(max=500, message="keep the URL under 500 characters")])
    secret = PasswordField("Secret", validators=[
        Optional(), Length(max=500, message="keep the secret under 500 characters")])
    enabled = SelectField("Status", choices=[SelectChoice("1", "on"), SelectChoice("0", "off")])
    forget_url = BooleanField("Forget the saved URL")
    forget_secret = BooleanField("Forget the saved secret")

    def attach(self, error) -> None:
        """Show a service refusal under the field it names (url, secret), else across the form."""
        if error.field in ("url", "secret"):
            self[error.field].errors = [*self[error.field].errors, error.detail]
        else:
            self.form_errors.append(error.detail)


class SettingForm(ConsoleForm):
    """One setting's new value; the service checks it against the setting's limits."""

    value = StringField("Value", validators=[DataRequired(message="enter a value")])


class TenantForm(ConsoleForm):
    # Quotas are text here: the service checks them and says what to send, for the form and the API alike.
    name = StringField("Name", validators=[DataRequired(message="give the tenant a name"), Length(max=64)])
    max_running = StringField("Max running", validators=[Optional()])
    max_queued = StringField("Max queued", validators=[Optional()])


class QuotaForm(ConsoleForm):
    max_running = StringField("Max running", validators=[Optional()])
    max_queued = StringField("Max queued", validators=[Optional()])


class ReserveForm(ConsoleForm):
    """Reserve capacity for a tenant: what POST /ops/capacity/reserve takes, checked by the same service."""

    # Counts are text, as in the quota forms: the service checks them and says what to send.
    tenant = SelectField("Tenant", choices=[], validate_choice=False)
    # Required here too, so an empty form marks every field it lacks at once, not its times first.
    running_slots = StringField("Running slots", validators=[InputRequired("give the running slots to hold, e.g. 5")])
    queued_runs = StringField("Queued runs", default="0")
    # UTC, typed as the page writes times, like every time input in the console (see IsoTimeField).
    starts_at = IsoTimeField("Starts (UTC)", validators=[InputRequired("give the start, e.g. 2026-12-31 18:00")])
    ends_at = IsoTimeField("Ends (UTC)", validators=[InputRequired("give the end, e.g. 2027-01-02 06:00")])
    reason = StringField("Reason", validators=[InputRequired("give a reason: who needs the capacity, for what"),
                                               Length(max=255)])

    def attach(self, error) -> None:
        """Show a service refusal as the form's message, across its width."""
        # The service's words name the field (running_slots, ends_at) and are often long (a 409 says what is free
        # over the whole range); under one narrow input they pushed the others out of line.
        self.form_errors.append(error.detail)
