"""The shared Redis connection (transport for queues, breakers and locks)."""

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis
from flask import current_app
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

# How long a command may wait for Redis's answer. Without it a frozen Redis (stopped, swapping, a network
# partition that drops packets) held every page and submit that touched it until it came back. A worker
# raises it above its dequeue wait by itself (rq's Worker._set_connection).
ANSWER_TIMEOUT_S = 3
CONNECT_TIMEOUT_S = 2
# The login throttle's: a count is one small command, and on no answer the throttle counts in the web process's memory
# (and asks Redis again now and then), so a login waits this twice at most while Redis is frozen, not 3 s twice.
THROTTLE_TIMEOUT_S = 1


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
    app.extensions["rebound_redis"] = client(app.config["REDIS_URL"])


def client(url: str) -> redis.Redis:
    """Return a client that gives up on a Redis that is down or frozen within seconds, not never."""
    # One quick retry, not redis-py's default ten with backoff: with Redis down a page must answer in well under a
    # second that it is down, and the engine's callers already recover through the reconciler. Only a refused or
    # dropped connection is retried: a command that timed out may have been carried out (an enqueue sent twice).
    return redis.Redis.from_url(
        url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=ANSWER_TIMEOUT_S,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 1, supported_errors=(RedisConnectionError,)))


def limiter_options() -> dict:
    """Return the login throttle's Redis client options: it gives up sooner than the app's own client."""
    return {"socket_connect_timeout": THROTTLE_TIMEOUT_S, "socket_timeout": THROTTLE_TIMEOUT_S}


# After a page's read found Redis not answering, the reads that only decorate a page (the DLQ's bulk replays panel,
# its breaker hints) skip it this long: a frozen Redis cost the DLQ page 6 s (two 3 s timeouts) and every filter
# change 3 s more, in the incident it is opened for (helper 133).
QUIET_S = 15.0
T = TypeVar("T")


def read_or(read: Callable[[], T], fallback: T) -> T:
    """Return what a page's Redis read gives, or `fallback` when Redis does not answer (not asked again for QUIET_S
    after it did not, in this app)."""
    if time.monotonic() < current_app.extensions.get("rebound_redis_quiet_until", 0.0):
        return fallback
    try:
        return read()
    except (redis.RedisError, OSError):
        current_app.extensions["rebound_redis_quiet_until"] = time.monotonic() + QUIET_S
        return fallback


def get_redis() -> redis.Redis:
    """Return the current app's Redis client."""
    return current_app.extensions["rebound_redis"]


def limiter_storage_uri(url: str) -> str:
    """Translate a redis-py URL into the form the limits library expects."""
    return "redis+unix://" + url.removeprefix("unix://") if url.startswith("unix://") else url
