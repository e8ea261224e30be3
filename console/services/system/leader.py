"""A Redis lock with renewal: of several scheduler processes, exactly one fires."""

import contextlib
import os
import socket
import uuid

import redis

from console import metrics
from console.domain.clock import SYSTEM_CLOCK, Clock

KEY = "rebound:scheduler:leader"

# Renew only if we still hold it: compare-and-expire must be atomic, hence a script.
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class LeaderLock:
    """Hold the scheduler leadership for ttl_s at a time, renewed well before it lapses."""

    def __init__(self, connection: redis.Redis, ttl_s: float = 10.0, key: str = KEY, clock: Clock = SYSTEM_CLOCK):
        self.connection, self.clock = connection, clock
        self.leading = False
        self.ttl_ms = int(ttl_s * 1000)
        self.key = key
        self.identity = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._renew = connection.register_script(_RENEW)
        self._release = connection.register_script(_RELEASE)

    def acquire_or_renew(self) -> bool:
        """Take the lock if it is free, renew it if it is ours; tell whether we lead now.

        Contention (scheduler_lock_*_total, lock="leader") counts the leader's renewals, and as contended those that
        found the lock taken by another scheduler: leadership lost, not waited for. A standby finding it taken is
        the design working, so a standby's tries count nothing; a Redis outage is not contention either.
        """
        was_leading = self.leading
        try:
            leading = bool(self._renew(keys=[self.key], args=[self.identity, self.ttl_ms]))
            if not leading:
                leading = bool(self.connection.set(self.key, self.identity, nx=True, px=self.ttl_ms))
        except (redis.RedisError, OSError):
            # Without Redis we cannot prove we lead; stop firing rather than risk two leaders.
            self.leading = False
            return False
        self.leading = leading
        if was_leading:
            at = self.clock()
            metrics.LOCK_ATTEMPTS.inc_now(at=at, lock="leader")
            if not leading:
                metrics.LOCK_CONTENDED.inc_now(at=at, lock="leader")
        return leading

    def release(self) -> None:
        """Give the lock up so a standby takes over at once."""
        with contextlib.suppress(redis.RedisError, OSError):
            self._release(keys=[self.key], args=[self.identity])

    def holder(self) -> str | None:
        """Return who leads now, if anyone."""
        value = self.connection.get(self.key)
        return value.decode() if value else None


def nobody_leads(connection: redis.Redis) -> bool:
    """Tell whether no scheduler leads now, for a page's warning (False when Redis cannot say: it warns of nothing)."""
    return anyone_leads(connection) is False


def anyone_leads(connection: redis.Redis) -> bool | None:
    """Tell whether some scheduler holds the lock now (None: Redis did not answer, so nobody can tell)."""
    try:
        return bool(connection.exists(KEY))
    except (redis.RedisError, OSError):
        return None
