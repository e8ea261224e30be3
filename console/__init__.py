"""Rebound: an ops console for background tasks that fail."""

from pathlib import Path

from flask import Flask

ROOT = Path(__file__).resolve().parent.parent


def create_app(config: dict | None = None) -> Flask:
    """Build the web app: defaults, then the environment, then the caller's mapping."""
    from console import auth, json_input, metrics, page_hooks, proxy, redis_conn, safety, web
    from console import config as settings
    from console.api import register as register_api
    from console.commands import register as register_cli
    from console.db import migrations, sqlite, sqlite_busy
    from console.extensions import csrf, db, htmx, limiter
    from console.services.engine import followups, registry, transition_lines
    from console.services.recovery import runbook_registry
    from console.web import converters

    app = Flask(__name__, template_folder=str(ROOT / "templates"), static_folder=str(ROOT / "static"))
    app.config.update(settings.DEFAULTS)
    app.config.update(settings.from_env())
    app.config.update(config or {})
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = settings.stored_secret_key(app.config["DATA_DIR"])

    sqlite_busy.init_app(app)
    db.init_app(app)
    sqlite.init_app(app)
    migrations.init_app(app)
    redis_conn.init_app(app)
    metrics.init_app(app)
    registry.init_app(app)
    followups.init_app(app)
    transition_lines.init_app(app)
    runbook_registry.init_app(app)
    app.config.setdefault("RATELIMIT_STORAGE_URI", redis_conn.limiter_storage_uri(app.config["REDIS_URL"]))
    app.config.setdefault("RATELIMIT_STORAGE_OPTIONS", redis_conn.limiter_options())
    limiter.init_app(app)
    csrf.init_app(app)
    htmx.init_app(app)
    auth.init_app(app)
    safety.init_app(app)
    proxy.init_app(app)
    json_input.init_app(app)
    converters.init_app(app)
    page_hooks.init_app(app)

    web.register(app)
    register_api(app)
    register_cli(app)
    return app
