"""Your account: who you are here, and your own password."""

from flask import Blueprint, current_app, flash, redirect, render_template, session, url_for
from flask_login import current_user, login_user

from console.auth import current_actor, requires
from console.extensions import limiter
from console.services.errors import InvalidInput
from console.services.people import users
from console.services.people.permissions import DOING, GRANTS, VIEW
from console.web.account.forms import ChangePasswordForm

bp = Blueprint("account", __name__, url_prefix="/account")


def _wrong_current(response) -> bool:
    # Only a wrong current password counts: a session left open must not be a way to guess the password.
    return response.status_code == 401


def _page(form, status=200):
    # DOING says what a refusal is about ("view this"); here each permission is named for what it opens.
    may = ["read the console's pages" if permission == VIEW else DOING[permission]
           for permission in sorted(GRANTS[current_user.role])]
    return render_template("account/index.html", form=form, may=may), status


@bp.get("/")
@requires(VIEW)
def index():
    return _page(ChangePasswordForm())


@bp.post("/password")
@requires(VIEW)
@limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"], key_func=lambda: f"password|{current_user.id}",
               deduct_when=_wrong_current,
               error_message="Too many wrong current passwords; wait a minute and try again.")
def change_password():
    form = ChangePasswordForm()
    if not form.validate_on_submit():
        return _page(form, 422)
    user = current_user._get_current_object()
    try:
        users.change_own_password(user, form.current.data, form.password.data, current_actor())
    except InvalidInput as error:
        form[error.field].errors = [*form[error.field].errors, error.detail]
        return _page(form, 401 if error.field == "current" else 422)
    # Every session of theirs ended with the change (a laptop left logged in, whoever had the old password); this
    # one goes on as a new session.
    session.clear()
    users.start_session(user)
    login_user(user)
    flash("Your password is changed; your other sessions have ended.", "success")
    return redirect(url_for("account.index"))
