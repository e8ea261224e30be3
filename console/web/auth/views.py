"""Log in and out."""

import logging

from flask import Blueprint, current_app, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required, login_user, logout_user

from console.auth import current_actor, public, safe_next
from console.domain.clock import utcnow
from console.extensions import db, limiter
from console.services.audit import trail as audit
from console.services.people import users
from console.web.auth.forms import LoginForm

bp = Blueprint("auth", __name__)
security_log = logging.getLogger("rebound.security")


def _login_limit() -> str:
    return current_app.config["LOGIN_RATE_LIMIT"]


def _address_limit() -> str:
    return current_app.config["LOGIN_RATE_LIMIT_PER_ADDRESS"]


def _address_key() -> str:
    return f"address|{request.remote_addr}"


def _login_key() -> str:
    # Per address and name: one noisy neighbour cannot lock everybody out.
    return f"{request.remote_addr}|{request.form.get('username', '')[:64].lower()}"


def _failed(response) -> bool:
    # Only failed attempts count: a person who logs in and out all day is never throttled.
    return response.status_code == 401


@bp.route("/login", methods=["GET", "POST"])
@public
@limiter.limit(_login_limit, key_func=_login_key, methods=["POST"], deduct_when=_failed,
               error_message="Too many login attempts; wait a minute and try again.")
@limiter.limit(_address_limit, key_func=_address_key, methods=["POST"], deduct_when=_failed,
               error_message="Too many failed logins from this address; wait a minute and try again.")
def login():
    if current_user.is_authenticated:
        return redirect(url_for("overview.index"))
    form = LoginForm()
    if form.validate_on_submit():
        user = users.authenticate(form.username.data, form.password.data)
        if user is not None:
            # A new session, so a new CSRF token: one planted before login (a sibling subdomain's cookie) forged
            # posts after it (helper 127).
            session.clear()
            users.start_session(user)
            login_user(user)
            audit.record(db.session, current_actor(), "auth.login", "user", user.id, tenant=users.tenant_of(user))
            db.session.commit()
            return redirect(safe_next(request.args.get("next")))
        # A name no account has is not written: people type their password into the name box (helper 99).
        named = form.username.data[:64] if users.find(form.username.data) else "<no such account>"
        security_log.warning("login failed user=%s addr=%s", named, request.remote_addr)
        # Beside the fields, as an alert they point at: a flash at the top of a new page was not announced.
        return render_template("auth/login.html", form=form, failed=True), 401
    return render_template("auth/login.html", form=form), 400 if form.errors else 200


@bp.post("/logout")
@login_required
@public
def logout():
    audit.record(db.session, current_actor(), "auth.logout", "user", current_user.id,
                 tenant=users.tenant_of(current_user))
    # Ends the session on the server too: a copy of the cookie taken before logout no longer works. The person's
    # other sessions (a laptop, a phone) go on: a password or role change ends those.
    users.end_session(current_user, utcnow(), current_app.permanent_session_lifetime)
    db.session.commit()
    logout_user()
    return redirect(url_for("auth.login"))
