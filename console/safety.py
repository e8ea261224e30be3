"""Safety defaults in one place: response headers, error pages, SQLite pragmas."""

import logging
import sqlite3

from flask import jsonify, render_template, request
from flask_wtf.csrf import CSRFError
from sqlalchemy import event
from sqlalchemy.engine import Engine
from werkzeug.exceptions import HTTPException

from console import sqlite_busy
from console.auth import wants_json
from console.services.errors import ServiceError

security_log = logging.getLogger("rebound.security")


@event.listens_for(Engine, "connect")
def _sqlite_pragmas(dbapi_connection, connection_record):
    # WAL lets the web, workers and scheduler read while one of them writes.
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
        if isinstance(dbapi_connection, sqlite_busy.Connection):  # not when REBOUND_SQLITE_BUSY_HANDLER=0
            sqlite_busy.install(dbapi_connection)


def _error_response(status: int, code: str, detail: str, body: dict | None = None):
    if wants_json():
        return jsonify(body or {"error": code, "detail": detail}), status
    return render_template("error.html", status=status, detail=detail), status


def init_app(app) -> None:
    """Register headers for every response and one error answer per kind of failure."""

    @app.after_request
    def headers(response):
        if request.endpoint not in ("static", "plotly_js"):
            response.headers["Cache-Control"] = "no-store"
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    @app.errorhandler(CSRFError)
    def csrf_error(error):
        security_log.warning("csrf rejected path=%s addr=%s reason=%s", request.path, request.remote_addr,
                             error.description)
        return _error_response(400, "csrf", f"{error.description} Reload the page and try again.")

    @app.errorhandler(ServiceError)
    def service_error(error):
        return _error_response(error.status, error.code, error.detail, error.to_dict())

    @app.errorhandler(HTTPException)
    def http_error(error):
        code = (error.name or "error").lower().replace(" ", "_")
        return _error_response(error.code or 500, code, error.description or error.name)
