"""Admin: people, roles and API tokens."""

from typing import NamedTuple

import redis
from flask import flash, redirect, render_template, request, url_for
from wtforms.fields.choices import SelectChoice

from console.auth import current_actor, requires, tenant_scope
from console.extensions import htmx
from console.redis_conn import get_redis
from console.services.errors import ServiceError
from console.services.people import tenants, tokens, users
from console.services.people.permissions import ADMIN
from console.web.admin.blueprint import bp
from console.web.admin.forms import ISSUE_KEY, CreateTokenForm, CreateUserForm, UpdateUserForm, tenant_choices


class ShownOnce(NamedTuple):
    """A generated password, shown on the one answer that made it."""

    user: object
    password: str
    said: str


def _tenant_choices():
    # A tenant-scoped admin is offered only their own tenant, never "all tenants".
    scope = tenant_scope()
    if scope is None:
        return tenant_choices(tenants.all_tenants())
    return [SelectChoice(tenant.name) for tenant in tenants.all_tenants() if tenant.id == scope]


def _create_user_form() -> CreateUserForm:
    form = CreateUserForm()
    form.tenant.choices = _tenant_choices()
    return form


def _users_page(form=None, status=200, *, shown_once=None):
    rows = [(user, UpdateUserForm.of(user)) for user in users.all_users(tenant_scope())]
    return render_template("admin/users.html", rows=rows, form=form or _create_user_form(),
                           shown_once=shown_once), status


@bp.get("/")
@requires(ADMIN)
def index():
    """The Admin area's address alone: its first page, as the nav's Admin link opens."""
    return redirect(url_for("admin.users_index"))


@bp.get("/users")
@requires(ADMIN)
def users_index():
    return _users_page()


@bp.post("/users")
@requires(ADMIN)
def create_user():
    form = _create_user_form()
    if not form.validate_on_submit():
        return _users_page(form, 422)
    try:
        tenant = tenants.require(form.tenant.data) if form.tenant.data else None
        user, generated = users.create(form.username.data, form.role.data, form.password.data or None,
                                       current_actor(), tenant=tenant, scope=tenant_scope())
    except ServiceError as error:
        (form[error.field].errors if error.field in form else form.form_errors).append(error.detail)
        return _users_page(form, error.status)
    # As the CLI says it: a tenant admin's new person is limited to their tenant, whatever the form asked (helper 139).
    limited = f", tenant {user.tenant.name} only" if user.tenant_id is not None else ""
    message = f"Created {user.username} ({user.role}{limited})."
    if generated:
        # On this answer only, never in a flash: a flash travels in the session cookie.
        return _users_page(shown_once=ShownOnce(user, generated, message))
    flash(message, "success")
    return redirect(url_for("admin.users_index"))


@bp.post("/users/<int:user_id>/password")
@requires(ADMIN)
def reset_password(user_id: int):
    user = users.get(user_id, tenant_scope())
    if not _first_send(request.form.get("reset_key", "")):
        # A reload of the answer sent the form again: it reset the password a second time, and the one the admin
        # had given out stopped working (helper 164).
        flash(f"That reset of {user.username}'s password was done already (the page was sent again): its password was "
              "shown once. Press Reset password again for a new one.", "error")
        return redirect(url_for("admin.users_index"), 303)
    try:
        generated = users.reset_password(user, current_actor())
    except ServiceError as error:
        flash(error.detail, "error")
        return redirect(url_for("admin.users_index"))
    return _users_page(shown_once=ShownOnce(
        user, generated, f"Reset {user.username}'s password; their sessions have ended, and they choose their own at "
                         "their next login."))


@bp.post("/users/<int:user_id>")
@requires(ADMIN)
def update_user(user_id: int):
    user = users.get(user_id, tenant_scope())
    form = UpdateUserForm(prefix=f"u{user.id}")
    error, revoked = None, 0
    if form.validate_on_submit():
        try:
            user, revoked = users.update(user, current_actor(), role=form.role.data, active=form.active.data == "1",
                                         seen=form.seen_state())
        except ServiceError as exc:
            error = exc.detail
    else:
        error = "; ".join(f"{k}: {', '.join(v)}" for k, v in form.errors.items())
    if htmx:
        form = UpdateUserForm.of(user)
        return render_template("admin/_user_row.html", user=user, form=form, error=error, saved=error is None,
                               revoked=revoked), 200 if error is None else 409
    flash(error or f"Saved {user.username}.{_revoked_words(revoked)}", "error" if error else "success")
    return redirect(url_for("admin.users_index"))


def _first_send(key: str) -> bool:
    """Tell whether this is the first send of a form shown with this key (an hour's memory, in Redis); a key that is
    not one the page gave, or a Redis that does not answer, counts as first."""
    if not ISSUE_KEY.fullmatch(key):  # a form's key as pages draw them (uuid4().hex), as a token form's
        return True
    try:
        return bool(get_redis().set(f"rebound:password-reset:{key}", 1, nx=True, ex=3600))
    except (redis.RedisError, OSError):
        return True


def _revoked_words(revoked: int) -> str:
    return f" Their {revoked} API token{'s were' if revoked != 1 else ' was'} revoked." if revoked else ""


def _token_form(*, with_disabled: bool = False) -> CreateTokenForm:
    form = CreateTokenForm()
    _offer_people(form, with_disabled=with_disabled)
    form.tenant.choices = _tenant_choices()
    return form


def _offer_people(form: CreateTokenForm, *, with_disabled: bool = False) -> None:
    # Each with their role and, when limited to one, their tenant: what a token of theirs can reach. Nobody first:
    # who a token acts as is chosen, never defaulted (a person disabled meanwhile fell back to the first, an admin,
    # and the next press issued a token acting as them; helper 128).
    form.user.choices = [SelectChoice("", "choose who it acts as")] + [
        SelectChoice(str(u.id), f"{u.username} ({u.role}{', ' + u.tenant.name if u.tenant else ''})")
        for u in users.all_users(tenant_scope()) if u.active or with_disabled]
    if form.user.data not in {choice.value for choice in form.user.choices}:
        form.user.data = ""


@bp.get("/tokens")
@requires(ADMIN)
def tokens_index():
    form = _token_form()
    form.new_key()
    return render_template("admin/tokens.html", tokens=tokens.all_tokens(tenant_scope()), form=form,
                           plaintext=None)


@bp.post("/tokens")
@requires(ADMIN)
def create_token():
    # Someone disabled since the page was drawn is still a choice here, so the service says why they get no token
    # ("Not a valid choice." did not); the form drawn again offers active people only.
    form = _token_form(with_disabled=True)
    issued, plaintext, status = None, None, 201
    if form.validate_on_submit():
        try:
            tenant = tenants.require(form.tenant.data) if form.tenant.data else None
            issued, plaintext = tokens.issue(users.get(int(form.user.data), tenant_scope()), current_actor(),
                                        name=form.name.data or "", tenant=tenant, scope=tenant_scope(),
                                        issue_key=form.key(), days=int(form.days.data) if form.days.data else None)
            form.new_key()  # the form below is for the next token
        except ServiceError as error:
            # At the field it is about (a tenant the person does not act for), else below the form.
            field = getattr(form, error.field, None) if error.field in ("user", "tenant", "days") else None
            (field.errors if field is not None else form.form_errors).append(error.detail)
            status = error.status
            if isinstance(error, tokens.AlreadyIssued):
                form.new_key()
    else:
        status = 422
    _offer_people(form)
    # The plaintext is rendered into this one response and never again, so no redirect here.
    return render_template("admin/tokens.html", tokens=tokens.all_tokens(tenant_scope()), form=form,
                           plaintext=plaintext, issued=issued), status


@bp.post("/tokens/<int:token_id>/revoke")
@requires(ADMIN)
def revoke_token(token_id: int):
    token, revoked = tokens.revoke(token_id, current_actor(), scope=tenant_scope())
    if revoked:
        flash(f"Revoked token {token.prefix}….", "success")
    else:  # a second press, or another tab's: said as it is, not as a new revoke
        flash(f"Token {token.prefix}… was already revoked ({token.revoked_at:%Y-%m-%d %H:%M} UTC).", "info")
    return redirect(url_for("admin.tokens_index"))
