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


def read(names) -> dict[str, tuple[datetime, str]]:
    """Return the channels of `names` that have a silence on record: when it ends and what happened (one round
    trip); whether it is still on is the caller's clock's to say."""
    names = list(names)
    if not names:
        return {}
    try:
        said = get_redis().mget([KEY + name for name in names])
    except redis.RedisError as error:
        log.warning("delivery: which channels are silent is unknown (%s); trying them", type(error).__name__)
        return {}
    found = {}
    for name, value in zip(names, said, strict=True):
        if value:
            until, _, what = value.decode().partition("|")
            found[name] = (datetime.fromisoformat(until), what)
    return found


def why(name: str, now: datetime) -> str | None:
    """Say why the channel is not to be waited on at `now` (None: try it)."""
    until, what = read([name]).get(name, (None, None))
    return what if until is not None and until > now else None


def timed_out(name: str, error: str, message_id: int, now: datetime) -> datetime:
    """Start the channel's silence; return when it ends."""
    # The end is kept as the deliverer's clock reads it (a test's clock moves on its own); Redis drops the key then.
    ends = now + timedelta(seconds=SILENT_S)
    _quietly(lambda connection: connection.set(
        KEY + name, f"{ends.isoformat()}|{error} for message #{message_id} at {now:%H:%M:%S} UTC", ex=SILENT_S))
    return ends


def answered(name: str) -> None:
    """End the channel's silence."""
    _quietly(lambda connection: connection.delete(KEY + name))


def _quietly(write) -> None:
    try:
        write(get_redis())
    except redis.RedisError as error:  # delivery goes on; at worst a silent channel is waited on again
        log.warning("delivery: a channel's silence could not be noted (%s)", type(error).__name__)
