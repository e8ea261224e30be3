"""Sessions for people, bearer tokens for services, and the role check every route carries."""

import functools
import logging
from urllib.parse import urlsplit

from flask import abort, g, jsonify, redirect, request, url_for
from flask.sessions import SecureCookieSessionInterface
from flask_login import current_user

from console.extensions import db, login_manager
from console.models import EndedSession, User
from console.services.actor import Actor
from console.services.errors import Forbidden
from console.services.people import tokens
from console.services.people.permissions import DOING, can

security_log = logging.getLogger("rebound.security")
API_PREFIXES = ("/internal/", "/worker/", "/events", "/api/", "/ops/")


def wants_json() -> bool:
    """Tell whether this request is for the JSON API rather than a console page."""
    return request.path.startswith(API_PREFIXES) or request.authorization is not None


def requires(permission: str, doing: str | None = None):
    """Let the view run only for a logged-in user whose role grants the permission; `doing` names the act in the
    refusal when the permission's own name would not ("roll a change back", not "approve")."""

    def decorate(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            # The API is CSRF-exempt, so it must not accept the session cookie: tokens only.
            api_call = request.path.startswith(API_PREFIXES)
            user = _api_user() if api_call else current_user._get_current_object()
            if not user.is_authenticated or (api_call and g.get("api_token") is None):
                return login_manager.unauthorized()
            if user.must_change_password and g.get("api_token") is None and request.endpoint not in OWN_PASSWORD:
                return _to_own_password()
            if not can(user.role, permission):
                security_log.warning("forbidden user=%s role=%s needs=%s path=%s", user.username, user.role,
                                     permission, request.path)
                abort(403, f"your role ({user.role}) may not {doing or DOING[permission]}")
            return view(*args, **kwargs)

        wrapper.required_permission = permission
        return wrapper

    return decorate


# What a person whose password an admin reset may open before choosing their own (logging out needs no role).
OWN_PASSWORD = frozenset({"account.index", "account.change_password"})


def _to_own_password():
    """Send a person whose password an admin reset (and so has seen) to choose their own first."""
    target = url_for("account.index")
    if request.headers.get("HX-Request"):
        return "", 204, {"HX-Redirect": target}
    return redirect(target)


def _unscoped_only(refusal: str, refused: str):
    """Let only a person or token not limited to a tenant through; anyone else gets a 403 saying `refusal`."""

    def decorate(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            if tenant_scope() is not None:
                security_log.warning("tenant-scoped %s refused user=%s path=%s", refused, current_user.username,
                                     request.path)
                raise Forbidden(refusal)
            return view(*args, **kwargs)

        return wrapper

    return decorate


def shared_by_all_tenants(what: str):
    """Let only a person or token not limited to a tenant change `what`, which every tenant shares."""
    return _unscoped_only(f"{what} are shared by every tenant; only a person or token not limited to a tenant may "
                          "change them", f"change of shared {what}")


def every_tenants_view(why: str):
    """Let only a person not limited to a tenant open a page whose figures or messages are every tenant's; `why`
    says so to anyone else."""
    return _unscoped_only(f"{why}; only a person not limited to a tenant may open it", "view of every tenant's page")


def safe_next(target: str | None) -> str:
    """Return where a login goes next: a path inside the console, else the Overview (never another host)."""
    if target and target.startswith("/") and not target.startswith("//") and not urlsplit(target).netloc:
        return target
    return url_for("overview.index")


def public(view):
    """Mark a view as open to everyone (login page, health check), on purpose."""
    view.required_permission = None
    return view


def current_actor() -> Actor:
    """Return the person (or token) behind this request, for the audit log."""
    user = current_user._get_current_object()
    name = user.username if user.is_authenticated else "anonymous"
    if getattr(g, "api_token", None) is not None:
        name = f"{name} (token {g.api_token.prefix})"
    return Actor(name, getattr(user, "id", None), request.remote_addr, tenant_id=tenant_scope())


def tenant_scope() -> int | None:
    """Return the tenant id this request is limited to, or None for every tenant."""
    token = getattr(g, "api_token", None)
    if token is not None and token.tenant_id:
        return token.tenant_id
    return current_user.tenant_id if current_user.is_authenticated else None


def _sessionless(req) -> bool:
    """Tell whether the request goes without the cookie session: an API call, or any call with a bearer token."""
    return req.path.startswith(API_PREFIXES) or (req.authorization is not None and req.authorization.type == "bearer")


class NoSessionForTheApi(SecureCookieSessionInterface):
    """Cookie sessions for the console; an API call, or a page called with a bearer token, gets an empty session that
    is never read from or written to a cookie: the token alone says who calls."""

    def open_session(self, app, request):
        if _sessionless(request):
            # Verifying the cookie's signature (and saving it back) was work on every API call for a session the
            # call may not use. A page's cookie kept by a token's client (curl -b) holds a CSRF token and no user,
            # which Flask-Login's strong protection took for a stolen session: the token was refused (helper 107).
            return self.session_class()
        return super().open_session(app, request)

    def save_session(self, app, session, response):
        if not _sessionless(request):
            super().save_session(app, session, response)


def _token_user(req):
    """Return the user of the request's bearer token, or None (a token given but refused is noted for the 401)."""
    if req.authorization is None or req.authorization.type != "bearer" or not req.authorization.token:
        return None  # no token sent (a bare "Bearer" too): the 401 asks for one, it refuses none
    token = tokens.authenticate(req.authorization.token)
    if token is None:
        security_log.warning("invalid bearer token path=%s addr=%s", req.path, req.remote_addr)
        g.token_rejected = tokens.refusal(req.authorization.token)  # what the 401 says
        return None
    g.api_token = token
    return token.user


def _api_user():
    """Return an API call's user, from its bearer token only, and make it Flask-Login's current user."""
    # Flask-Login's own loader first checks the session's protection (a SHA-512 of the address and user agent) and
    # looks for a remember-me cookie: an API call uses neither, and that was 3 % of its CPU. `g._login_user`
    # is where Flask-Login keeps the request's user (tests/contracts/test_flask_login_internals.py).
    if "_login_user" not in g:
        g._login_user = _token_user(request) or login_manager.anonymous_user()
    return g._login_user


def init_app(app) -> None:
    """Wire Flask-Login: session users, bearer-token users, and the answer to 'not logged in'."""
    app.session_interface = NoSessionForTheApi()
    login_manager.init_app(app)
    login_manager.login_view = "auth.login"
    login_manager.login_message = "Log in to continue."
    login_manager.session_protection = "strong"

    @login_manager.user_loader
    def load_user(session_id: str):
        user_id, _, rest = session_id.partition(":")
        generation, _, own = rest.partition(":")
        if not (user_id.isdigit() and generation.isdigit()):
            return None  # a cookie from before session generations, or forged: log in again
        user = db.session.get(User, int(user_id))
        # A password or role change, or disabling, raised the generation: every session of the user has ended.
        if not (user and user.active and user.session_generation == int(generation)):
            return None
        if own and db.session.get(EndedSession, own) is not None:
            return None  # logged out of: this cookie, and any copy of it
        user.session_id = own or None
        return user

    # A console page may be called with a bearer token too (it then acts as the token's user).
    login_manager.request_loader(_token_user)

    @login_manager.unauthorized_handler
    def unauthorized():
        if wants_json():
            detail = g.get("token_rejected") or "send 'Authorization: Bearer <token>'"
            # RFC 6750: the scheme to use, and that the one sent was refused.
            challenge = 'Bearer realm="rebound"' + (', error="invalid_token"' if g.get("token_rejected") else "")
            return jsonify(error="unauthorized", detail=detail), 401, {"WWW-Authenticate": challenge}
        if request.headers.get("HX-Request"):
            return "", 401, {"HX-Redirect": url_for("auth.login")}
        return redirect(url_for("auth.login", next=request.full_path if request.query_string else request.path))
