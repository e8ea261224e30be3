"""Read every REBOUND_* setting from the environment, in one place."""

import math
import os
import secrets
from pathlib import Path

from console import private

PROJECT = Path(__file__).resolve().parent.parent


def data_dir_of(env) -> Path:
    """Return REBOUND_DATA_DIR as an absolute path (./instance when unset)."""
    # Empty counts as unset, as for the other paths and URLs: an empty value put the data in the working directory.
    return Path(env.get("REBOUND_DATA_DIR") or "instance").resolve()


def stored_secret_key(data_dir: str) -> str:
    """Return the key generated once and kept in the data dir (created on first call)."""
    data_dir = Path(data_dir)
    key_file = data_dir / "secret_key"
    if not key_file.exists():
        private.make_dir(data_dir)
        # Write-then-rename so two processes starting together agree on one key.
        tmp = key_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(secrets.token_urlsafe(48))
        tmp.chmod(0o600)
        if not key_file.exists():
            tmp.replace(key_file)
        else:
            tmp.unlink()
    return key_file.read_text().strip()


def _number(env, name: str, default, kind=int, low=None, high=None):
    """Read a number setting, refusing one outside what works: REBOUND_PORT=99999 was a traceback later,
    REBOUND_WORKERS=0 a console "ready" with no worker, REBOUND_LEADER_TTL_S=0 a scheduler that never led and
    REBOUND_HEARTBEAT_S=0 a worker spinning a core (helper 118)."""
    raw = env.get(name)
    if raw in (None, ""):
        return default
    what = "a whole number" if kind is int else "a number"
    try:
        value = kind(raw)
    except ValueError:
        raise SystemExit(f"{name} must be {what}, got {raw!r}") from None
    if not math.isfinite(value) or (low is not None and value < low) or (high is not None and value > high):
        bounds = (f"from {_shown(low)} to {_shown(high)}" if high is not None else f"at least {_shown(low)}") \
            if low is not None else "finite"
        raise SystemExit(f"{name} must be {what} {bounds}, got {raw!r}")
    return value


def _shown(bound) -> str:
    """Write a bound as people read it: 2147483648, not 2.14748e+09 (helper 156); 0.5 as 0.5."""
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def _switch(env, name: str, default: bool) -> bool:
    """Read an on/off setting: "off" turned REBOUND_ACCESS_LOG on, as anything but 0, false or no did."""
    raw = (env.get(name) or "").strip().lower()
    if raw == "":
        return default
    if raw not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise SystemExit(f"{name} must be 1 or 0 (true/false, yes/no, on/off), got {raw!r}")
    return raw in ("1", "true", "yes", "on")


def _redis_url(env) -> str:
    url = env.get("REBOUND_REDIS_URL") or ""
    if url and not url.startswith(("redis://", "rediss://", "unix://")):
        # Not echoed: a URL may carry a password.
        raise SystemExit("REBOUND_REDIS_URL must be a redis://, rediss:// or unix:// URL (e.g. "
                         "redis://host:6379/1); the one given is not")
    return url


def _modules(env, name: str, shipped: str) -> list[str]:
    """Return the shipped module and those the variable adds: naming one's own modules must not drop Rebound's
    (the demo's handlers, the params fix's runbook), which the console itself uses."""
    added = [module.strip() for module in (env.get(name) or "").split(",") if module.strip()]
    return list(dict.fromkeys([shipped, *added]))


def _demo(env) -> bool:
    # "maybe" read as on: demo data and the demo handlers that kill a worker on what was meant as production.
    return _switch(env, "REBOUND_DEMO", True)


def database_url(env, data_dir: Path) -> str:
    """Return REBOUND_DATABASE_URL (SQLite in the data dir when unset); one SQLAlchemy cannot use stops the start."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    url = env.get("REBOUND_DATABASE_URL") or f"sqlite:///{data_dir / 'rebound.db'}"
    try:
        make_url(url).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as error:
        raise SystemExit(f"REBOUND_DATABASE_URL is not a database URL Rebound can use ({error}); write it like "
                         "postgresql+psycopg://user:password@host:5432/rebound or sqlite:////path/to/rebound.db"
                         ) from None
    return url


def _rate_limit(env, name: str, default: str) -> str:
    # A limit that does not parse would switch the throttle off without a word: refuse it at start instead.
    from limits import parse_many

    raw = env.get(name) or default
    try:
        parse_many(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a rate such as '10 per minute' or '100/hour', got {raw!r}") from None
    return raw


SECURE_COOKIES = ("auto", "true", "false")


def _trusted_proxies(env) -> int:
    count = _number(env, "REBOUND_TRUSTED_PROXIES", 0)
    if count < 0:
        raise SystemExit(f"REBOUND_TRUSTED_PROXIES must be 0 or more (proxies in front of the console), got {count}")
    return count


def _secure_cookies(env) -> str:
    value = (env.get("REBOUND_SECURE_COOKIES") or "auto").strip().lower()
    if value not in SECURE_COOKIES:
        raise SystemExit(f"REBOUND_SECURE_COOKIES must be one of {', '.join(SECURE_COOKIES)}, got {value!r}")
    return value


def _key_fallbacks(env) -> list[str]:
    fallbacks = [key.strip() for key in (env.get("REBOUND_SECRET_KEY_FALLBACKS") or "").split(",") if key.strip()]
    if fallbacks and not env.get("REBOUND_AUDIT_KEY"):
        # Refused before any row is written: the audit chain is keyed by the secret key unless told otherwise, so
        # every row audited under the new key would leave the rows before it failing `rebound audit verify`.
        raise SystemExit("REBOUND_SECRET_KEY_FALLBACKS is set (the secret key was rotated) but REBOUND_AUDIT_KEY "
                         "is not: the audit log is chained with a key derived from the secret key unless "
                         "REBOUND_AUDIT_KEY is set. Set REBOUND_AUDIT_KEY to the secret key the log was written with "
                         "(the old one) in every process, and keep it set")
    return fallbacks


def _defaults_file(path: str, template: str, parse, error_type):
    """Read a shipped defaults file, writing the shipped one if it is missing; a bad value stops the start."""
    import yaml

    file = Path(path)
    if not file.exists():
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(template)
    try:
        # libyaml's safe loader where the wheel has it: the pure-Python one was a tenth of an app's start.
        return parse(yaml.load(file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError as error:
        raise SystemExit(f"{path}: not valid YAML ({error})") from None
    except error_type as error:
        raise SystemExit(f"{path}: {error}") from None


def worker_config(path: str):
    """Read the worker pool's defaults file (config/worker/standalone.yaml)."""
    from console.domain.worker_config import TEMPLATE, WorkerConfigError, parse

    return _defaults_file(path, TEMPLATE, parse, WorkerConfigError)


def task_defaults(path: str):
    """Read the tasks' defaults file (config/tasks/default_policy.yaml)."""
    from console.domain.task_defaults import TEMPLATE, TaskDefaultsError, parse

    return _defaults_file(path, TEMPLATE, parse, TaskDefaultsError)


LOG_FORMATS = ("auto", "json", "text")


def log_format(env=None) -> str:
    """Return REBOUND_LOG_FORMAT: json, text, or auto (json unless stderr is a terminal)."""
    env = os.environ if env is None else env
    value = (env.get("REBOUND_LOG_FORMAT") or "auto").strip().lower()
    if value not in LOG_FORMATS:
        raise SystemExit(f"REBOUND_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, got {value!r}")
    return value


def from_env(env=None) -> dict:
    """Build the Flask config mapping from REBOUND_* environment variables."""
    env = os.environ if env is None else env
    data_dir = data_dir_of(env)
    database = database_url(env, data_dir)
    worker_file = env.get("REBOUND_WORKER_CONFIG_FILE") or str(PROJECT / "config" / "worker" / "standalone.yaml")
    worker = worker_config(worker_file)
    task_file = env.get("REBOUND_TASK_DEFAULTS_FILE") or str(PROJECT / "config" / "tasks" / "default_policy.yaml")
    return {
        "DATA_DIR": str(data_dir),
        "SQLALCHEMY_DATABASE_URI": database,
        # A server database may drop idle connections; a local SQLite file cannot, so no ping per checkout.
        "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": not database.startswith("sqlite")},
        "REDIS_URL": _redis_url(env),
        "PORT": _number(env, "REBOUND_PORT", 8000, low=1, high=65535),
        "SECRET_KEY": env.get("REBOUND_SECRET_KEY") or None,
        # The audit chain's key (HMAC); unset, it is derived from the secret key (console/services/audit/chain.py).
        "AUDIT_KEY": env.get("REBOUND_AUDIT_KEY") or "",
        # Where the audit chain's head is published; unset, audit-anchor.log in the data dir.
        "AUDIT_ANCHOR_FILE": env.get("REBOUND_AUDIT_ANCHOR_FILE") or "",
        # Keys used before the current one (comma-separated): sessions signed and channel secrets sealed with them
        # still open, so rotating the key logs nobody out and loses no secret (Flask reads this name too).
        "SECRET_KEY_FALLBACKS": _key_fallbacks(env),
        # Reverse proxies in front of the console whose X-Forwarded-For/-Proto/-Host are believed (ProxyFix).
        "TRUSTED_PROXIES": _trusted_proxies(env),
        # Cookies marked Secure: auto (when the request came over HTTPS, the proxy's word included), true, false.
        "SECURE_COOKIES": _secure_cookies(env),
        "ADMIN_PASSWORD": env.get("REBOUND_ADMIN_PASSWORD") or "",
        # The worker pool's defaults file (console/domain/worker_config.py says what each value drives).
        "WORKER_CONFIG_FILE": worker_file,
        "WORKER_CONFIG": worker,
        # The tasks' defaults file: the retry policy and conflict template a task naming none gets.
        "TASK_DEFAULTS_FILE": task_file,
        "TASK_DEFAULTS": task_defaults(task_file),
        "WORKERS": _number(env, "REBOUND_WORKERS", worker.processes, low=1, high=1000),
        # `rebound web`'s granian: processes × threads each (chosen by measurement: docs/architecture.md).
        "WEB_WORKERS": _number(env, "REBOUND_WEB_WORKERS", 1, low=1, high=1000),
        "WEB_THREADS": _number(env, "REBOUND_WEB_THREADS", 4, low=1, high=1000),
        "DEMO": _demo(env),
        "LOGIN_RATE_LIMIT": _rate_limit(env, "REBOUND_LOGIN_RATE_LIMIT", "10 per minute"),
        # Failed logins from one address across every username (password spraying).
        "LOGIN_RATE_LIMIT_PER_ADDRESS": _rate_limit(env, "REBOUND_LOGIN_RATE_LIMIT_PER_ADDRESS", "30 per minute"),
        "POLICIES_FILE": env.get("REBOUND_POLICIES_FILE") or str(PROJECT / "config" / "tasks" / "retry-policies.yaml"),
        "COMMANDS_FILE": env.get("REBOUND_COMMANDS_FILE") or str(PROJECT / "config" / "commands.yaml"),
        # The largest request body accepted (a 413 above it, saying so); a batch of 1,000 runs fits.
        "MAX_CONTENT_LENGTH": _number(env, "REBOUND_MAX_BODY_BYTES", 4 * 1024 * 1024, low=1024, high=2**31),
        # How long a change waiting for a second person's approval stays open before it expires (24 h).
        "APPROVAL_TTL_S": _number(env, "REBOUND_APPROVAL_TTL_S", 86_400, low=60),
        # Python modules whose import registers `python:` handlers, comma-separated, after the shipped ones.
        "HANDLER_MODULES": _modules(env, "REBOUND_HANDLER_MODULES", "jobs.handlers"),
        # Python modules that list runbooks (each has a RUNBOOKS tuple), comma-separated, after the shipped ones.
        "RUNBOOK_MODULES": _modules(env, "REBOUND_RUNBOOK_MODULES", "jobs.runbooks"),
        # A runbook execution still running after this long is stopped by its worker and marked failed.
        "RUNBOOK_TIMEOUT_S": _number(env, "REBOUND_RUNBOOK_TIMEOUT_S", 21_600, low=1),
        "PLUGIN_RUNTIME_URL": env.get("REBOUND_PLUGIN_RUNTIME_URL", ""),
        # A running run whose heartbeat is older than this is taken for lost (its worker died).
        "HEARTBEAT_S": _number(env, "REBOUND_HEARTBEAT_S", 5.0, float, low=0.1, high=3600),
        "STALE_AFTER_S": _number(env, "REBOUND_STALE_AFTER_S", 30.0, float, low=0.5),
        # Call each handler in a forked child; `rebound worker --kind fork` turns it on for its process.
        "ISOLATE_HANDLERS": False,
        # A pending run not picked up this long after enqueueing is checked against Redis.
        "REQUEUE_AFTER_S": _number(env, "REBOUND_REQUEUE_AFTER_S", 30.0, float, low=0.5),
        # Alert and work-order channels; Admin → Channels can override each target (see console/services/delivery).
        "CONSOLE_URL": (env.get("REBOUND_CONSOLE_URL")
                        or f"http://127.0.0.1:{_number(env, 'REBOUND_PORT', 8000, low=1, high=65535)}").rstrip("/"),
        "SLACK_WEBHOOK_URL": env.get("REBOUND_SLACK_WEBHOOK_URL", ""),
        "PAGERDUTY_URL": env.get("REBOUND_PAGERDUTY_URL") or "https://events.pagerduty.com/v2/enqueue",
        "PAGERDUTY_ROUTING_KEY": env.get("REBOUND_PAGERDUTY_ROUTING_KEY", ""),
        "ALERT_WEBHOOK_URL": env.get("REBOUND_ALERT_WEBHOOK_URL", ""),
        "ALERT_WEBHOOK_SECRET": env.get("REBOUND_ALERT_WEBHOOK_SECRET", ""),
        "WORKORDER_URL": env.get("REBOUND_WORKORDER_URL", ""),
        "WORKORDER_SECRET": env.get("REBOUND_WORKORDER_SECRET", ""),
        "DELIVERY_ATTEMPTS": _number(env, "REBOUND_DELIVERY_ATTEMPTS", 5, low=1, high=100),
        "DELIVERY_BACKOFF_S": _number(env, "REBOUND_DELIVERY_BACKOFF_S", 2.0, float, low=0),
        "DELIVERY_TIMEOUT_S": _number(env, "REBOUND_DELIVERY_TIMEOUT_S", 5.0, float, low=0.1),
        # A repeat of an alert delivered less than this ago waits out the gap, gathering occurrences.
        "ALERT_REPEAT_S": _number(env, "REBOUND_ALERT_REPEAT_S", 300.0, float, low=0),
        # GET /metrics is open unless this is set; then it takes `Authorization: Bearer <token>`.
        "METRICS_TOKEN": env.get("REBOUND_METRICS_TOKEN", ""),
        # Web, workers and the scheduler send their counts to Redis this often (0: at every commit).
        "METRICS_FLUSH_S": _number(env, "REBOUND_METRICS_FLUSH_S", 1.0, float, low=0),
        # A scheduler that dies leaves its leader lock this long; a standby then takes over.
        "LEADER_TTL_S": _number(env, "REBOUND_LEADER_TTL_S", 10.0, float, low=1),
        # The running slots the system promises at once: capacity reservations together never exceed it.
        "CAPACITY_RUNNING": _number(env, "REBOUND_CAPACITY_RUNNING", 100, low=1),
        "LOG_FORMAT": log_format(env),
        # granian's line per request (every live page polls every few seconds): off unless asked for, or at DEBUG.
        "ACCESS_LOG": _switch(env, "REBOUND_ACCESS_LOG", False)
        or (env.get("REBOUND_LOG_LEVEL") or "").upper() == "DEBUG",
        # SQLite writers wait for the lock in 0.5 ms steps (console/sqlite_busy.py); 0 keeps SQLite's busy_timeout.
        "SQLITE_BUSY_HANDLER": _switch(env, "REBOUND_SQLITE_BUSY_HANDLER", True),
    }


DEFAULTS = {
    "SESSION_COOKIE_HTTPONLY": True,
    "SESSION_COOKIE_SAMESITE": "Lax",
    "REMEMBER_COOKIE_HTTPONLY": True,
    "WTF_CSRF_TIME_LIMIT": None,
    # A Redis outage must not lock people out of the console, nor open it to guessing: the login throttle counts in
    # the web process's memory until Redis answers again (Flask-Limiter's fallback, which asks Redis again now and
    # then). Swallowing the error alone let every guess through, and each login waited out Redis twice (6 s).
    "RATELIMIT_IN_MEMORY_FALLBACK_ENABLED": True,
    "RATELIMIT_SWALLOW_ERRORS": True,
    # A throttled login answers with Retry-After (seconds until the window frees a try), as RFC 9110 asks of a 429.
    "RATELIMIT_HEADERS_ENABLED": True,
    "TESTING": False,
}
