"""Channels that gave no answer: not waited on again for a while, so one hanging receiver delays no other channel.

A channel that timed out is "silent" for SILENT_S, in Redis (every deliverer, and the web process whose test from
the channel's page ends it, see the same): messages due meanwhile record it as not tried and come due again when the
silence ends, when the first of them tries it (one wait a minute, not one a message). Any answer ends it. Without
Redis a channel is never silent: it is tried, as before there was this.
"""

import logging
from datetime import datetime, timedelta

import redis

from console.redis_conn import get_redis

SILENT_S = 60
KEY = "rebound:delivery:silent:"
log = logging.getLogger("rebound.delivery")


def _read(name: str) -> tuple[datetime, str] | None:
    try:
        said = get_redis().get(KEY + name)
    except redis.RedisError as error:
        log.warning("delivery: whether %s is silent is unknown (%s); trying it", name, type(error).__name__)
        return None
    if not said:
        return None
    until, _, what = said.decode().partition("|")
    return datetime.fromisoformat(until), what


def why(name: str, now: datetime) -> str | None:
    """Say why the channel is not to be waited on at `now` (None: try it)."""
    found = _read(name)
    return found[1] if found and found[0] > now else None


def until(name: str, now: datetime) -> datetime | None:
    """Return when the channel's silence ends, or None when it is not silent at `now`."""
    found = _read(name)
    return found[0] if found and found[0] > now else None


def timed_out(name: str, error: str, message_id: int, now: datetime) -> None:
    # The end is kept as the deliverer's clock reads it (a test's clock moves on its own); Redis drops the key then.
    ends = now + timedelta(seconds=SILENT_S)
    _quietly(lambda connection: connection.set(
        KEY + name, f"{ends.isoformat()}|{error} for message #{message_id} at {now:%H:%M:%S} UTC", ex=SILENT_S))


def answered(name: str) -> bool:
    """End the channel's silence; tell whether it was silent (messages may be waiting for it)."""
    ended = []
    _quietly(lambda connection: ended.append(connection.delete(KEY + name)))
    return bool(ended and ended[0])


def _quietly(write) -> None:
    try:
        write(get_redis())
    except redis.RedisError as error:  # delivery goes on; at worst a silent channel is waited on again
        log.warning("delivery: a channel's silence could not be noted (%s)", type(error).__name__)
