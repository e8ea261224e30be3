"""Safety defaults in one place: response headers and error pages."""

import contextlib
import logging

from flask import Response, jsonify, make_response, redirect, render_template, request
from flask_login import current_user
from flask_wtf.csrf import CSRFError
from redis.exceptions import RedisError
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import ClientDisconnected, HTTPException, MethodNotAllowed, RequestEntityTooLarge
from werkzeug.exceptions import NotFound as NoRoute

from console.auth import safe_next, wants_json
from console.extensions import db
from console.services.errors import InvalidInput, NotFound, ServiceError

security_log = logging.getLogger("rebound.security")
log = logging.getLogger("rebound.web")

# Scripts only from the console's own files: no inline script, no eval (htmx runs with allowEval off).
CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    # Plotly, drawing the Reports page's charts, sets an empty style attribute (style=""): that value, nothing else.
    "style-src-attr 'unsafe-hashes' 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='",
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
))

# Each set unless the view set its own.
DEFAULT_HEADERS = (("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
                   ("Referrer-Policy", "same-origin"), ("Content-Security-Policy", CONTENT_SECURITY_POLICY))


# What the browser's htmx swaps in place (the page's htmx-config): a refusal raised outside a view's own answer.
SWAPPED_IN_PLACE = frozenset({403, 404, 409, 422})


def _error_response(status: int, code: str, detail: str, body: dict | None = None):
    if wants_json():
        return jsonify(body or {"error": code, "detail": detail}), status
    if status in SWAPPED_IN_PLACE and request.headers.get("HX-Request") == "true" and not request.headers.get(
            "HX-History-Restore-Request"):
        # Said above the page, where the console's messages are: the whole error page, swapped into the card that
        # asked, put a second console inside it and took the form's text away (helper 155).
        return (render_template("_error_flash.html", status=status, detail=detail), status,
                {"HX-Retarget": "#flashes", "HX-Reswap": "innerHTML"})
    return render_template("error.html", status=status, detail=detail), status


DATABASE_RETRY_AFTER_S = 5
BODY_CHUNK = 64 * 1024
DATABASE_UNAVAILABLE = ("the database did not answer (it may be restarting, unreachable or out of disk space), so this "
                        "request was not completed: send it again in a few seconds (a submit with the same "
                        "idempotency key is never made twice)")
# Not "nothing was done": the session is rolled back, but whatever committed before Redis was asked stays, so the
# page is to be read again before another try.
REDIS_UNAVAILABLE = ("Redis did not answer (it may be down, restarting or paused), so this did not go through: look "
                     "at the page again, then try once more when it answers; pages that only read the database still "
                     "work meanwhile")
NUL_REFUSED = "contains a NUL character (\\u0000), which Rebound does not store: remove it and send it again"


def _nul_field(values) -> str | None:
    """Name the first field or query parameter holding a NUL (PostgreSQL cannot store one in text)."""
    return next((key.replace("\x00", "\\u0000") for key, items in values.lists()
                 if "\x00" in key or any("\x00" in value for value in items)), None)


class ConsoleResponse(Response):
    """A response whose text never fails to encode: a lone surrogate kept from before input was checked shows as ?."""

    def set_data(self, value) -> None:
        # Strict UTF-8 would turn one such character in an audit row or a param into a 500 on every page showing it.
        super().set_data(value.encode("utf-8", "replace") if isinstance(value, str) else value)


def init_app(app) -> None:
    """Register headers for every response and one error answer per kind of failure."""
    app.response_class = ConsoleResponse

    @app.after_request
    def headers(response):
        if request.endpoint not in ("static", "plotly_js", "plotly_css"):
            response.headers["Cache-Control"] = "no-store"
        # One pass over the headers a view set, not one case-insensitive scan per default (a sixth of the hooks'
        # work on every API call).
        present = {name.lower() for name, _ in response.headers.items()}
        response.headers.extend([(name, value) for name, value in DEFAULT_HEADERS if name.lower() not in present])
        return response

    @app.after_request
    def drain_unread_body(response):
        # A refusal answered before its body was read (a 401, a 403) left the body on the connection: the server then
        # closed it after the answer without a "Connection: close", and a client reusing it (a requests Session) lost
        # its next request to a reset (helper 163). Read to its end, the connection stays good for the next one.
        length = request.content_length
        if length and length <= app.config["MAX_CONTENT_LENGTH"]:
            with contextlib.suppress(ClientDisconnected, OSError):
                while request.stream.read(BODY_CHUNK):
                    pass
        return response

    @app.before_request
    def refuse_nul():
        # PostgreSQL cannot store a NUL in text (a 500 wherever one reached a column) and on SQLite it hides in
        # what people read: refused in every field and parameter at once, as the JSON reader refuses it in a body.
        if "\x00" in request.path:
            raise NotFound("no such address: the path contains a NUL character (\\u0000)")
        field = _nul_field(request.args) or (_nul_field(request.form) if request.method != "GET" else None)
        if field is not None:
            raise InvalidInput(f"{field} {NUL_REFUSED}", field)

    @app.errorhandler(CSRFError)
    def csrf_error(error):
        if request.endpoint == "auth.login" and current_user.is_authenticated:
            # A second tab's login page, drawn before the first tab signed in (a new session, a new token): the
            # person is signed in, so that tab goes where it was going (helper 128).
            return redirect(safe_next(request.args.get("next")))
        security_log.warning("csrf rejected path=%s addr=%s reason=%s", request.path, request.remote_addr,
                             error.description)
        return _error_response(400, "csrf", f"{error.description} Reload the page and try again.")

    @app.errorhandler(ServiceError)
    def service_error(error):
        response = _error_response(error.status, error.code, error.detail, error.to_dict())
        if hasattr(error, "retry_after_s"):  # RFC 9110: a 429 says when to try again, as clients' retry logic reads
            return *response, {"Retry-After": str(error.retry_after_s)}
        return response

    @app.errorhandler(IntegrityError)
    def concurrent_write(error):
        # The services check before they write; this is two people writing one key in the same instant.
        db.session.rollback()
        log.info("write refused by a unique key path=%s: %s", request.path, type(error.orig).__name__)
        return _error_response(409, "conflict", "someone else changed this at the same moment; reload and try again")

    @app.errorhandler(OperationalError)
    @app.errorhandler(InterfaceError)
    @app.errorhandler(PoolTimeout)
    def database_unavailable(error):
        # Restarting, unreachable, out of disk, or busy past the wait: a 503 to try again, not a 500 (or an empty
        # one: the error page itself read the person from the database).
        with contextlib.suppress(Exception):
            db.session.rollback()
        log.warning("database unavailable path=%s: %s", request.path, error.__class__.__name__)
        headers = {"Retry-After": str(DATABASE_RETRY_AFTER_S)}
        if wants_json():
            return jsonify({"error": "database_unavailable", "detail": DATABASE_UNAVAILABLE}), 503, headers
        # Straight from the template, without the context processors: Flask-Login's reads the person.
        page = app.jinja_env.get_template("unavailable.html").render(detail=DATABASE_UNAVAILABLE)
        return page, 503, headers

    @app.errorhandler(RedisError)
    def redis_unavailable(error):
        # Queues, breakers and bulk operations live in Redis: an action that needs it during an incident is a 503 that
        # says so, not a 500 (pages that only read the database say what they cannot read, and are drawn).
        with contextlib.suppress(Exception):
            db.session.rollback()
        log.warning("redis unavailable path=%s: %s", request.path, error.__class__.__name__)
        response, status = _error_response(503, "redis_unavailable", REDIS_UNAVAILABLE)[:2]
        return response, status, {"Retry-After": str(DATABASE_RETRY_AFTER_S)}

    def _not_this_method(allowed: list[str]) -> str:
        taken = ", ".join(method for method in allowed if method not in ("HEAD", "OPTIONS")) or ", ".join(allowed)
        said = f"{request.method} is not taken at {request.path}: it takes {taken}"
        # The one a caller looks for here: runs are read under /api but submitted under /worker.
        if request.method == "POST" and request.path.rstrip("/") == "/api/runs":
            said += "; submit a run with POST /worker/tasks"
        return said

    @app.errorhandler(HTTPException)
    def http_error(error):
        code = (error.name or "error").lower().replace(" ", "_")
        detail = error.description or error.name
        if isinstance(error, RequestEntityTooLarge):
            detail = (f"the request body is larger than {app.config['MAX_CONTENT_LENGTH']:,} bytes "
                      "(REBOUND_MAX_BODY_BYTES); send less, or split it")
        if isinstance(error, MethodNotAllowed):
            detail = _not_this_method(error.valid_methods or [])
        if isinstance(error, NoRoute) and error.description == NoRoute.description and wants_json():
            # No route matched (werkzeug's words are a web page's): name what was asked and where the routes are.
            detail = (f"no endpoint answers {request.method} {request.path[:200]}: check the path against "
                      "/openapi.json (ids in a path are whole numbers)")
        response = make_response(*_error_response(error.code or 500, code, detail))
        # A 405 says which methods the path takes, as HTTP asks.
        for name, value in error.get_headers():
            if name.lower() != "content-type":
                response.headers[name] = value
        return response
