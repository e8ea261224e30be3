"""The shared Redis connection (transport for queues, breakers and locks)."""

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis
from flask import current_app
from redis.backoff import ExponentialBackoff
from redis.retry import Retry


def embedded_url(data_dir: str) -> str:
    """Return the URL of the embedded Redis that lives in the data dir."""
    return f"unix://{Path(data_dir) / 'redis.sock'}"


def shown_url(url: str) -> str:
    """Return a Redis URL with its password hidden, for a message a person reads."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)))


def init_app(app) -> None:
    """Create the app's Redis client; it connects lazily, on first use."""
    app.config["REDIS_URL_GIVEN"] = bool(app.config["REDIS_URL"])
    if not app.config["REDIS_URL"]:
        app.config["REDIS_URL"] = embedded_url(app.config["DATA_DIR"])
    # One quick retry, not redis-py's default ten with backoff: with Redis down a page must answer in
    # well under a second that it is down, and the engine's callers already recover through the reconciler.
    app.extensions["rebound_redis"] = redis.Redis.from_url(
        app.config["REDIS_URL"], socket_connect_timeout=2,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 1))


def get_redis() -> redis.Redis:
    """Return the current app's Redis client."""
    return current_app.extensions["rebound_redis"]


def limiter_storage_uri(url: str) -> str:
    """Translate a redis-py URL into the form the limits library expects."""
    return "redis+unix://" + url.removeprefix("unix://") if url.startswith("unix://") else url
