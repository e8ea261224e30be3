"""A Redis lock with renewal: of several scheduler processes, exactly one fires."""

import contextlib
import os
import socket
import uuid

import redis

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

    def __init__(self, connection: redis.Redis, ttl_s: float = 10.0, key: str = KEY):
        self.connection = connection
        self.ttl_ms = int(ttl_s * 1000)
        self.key = key
        self.identity = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._renew = connection.register_script(_RENEW)
        self._release = connection.register_script(_RELEASE)

    def acquire_or_renew(self) -> bool:
        """Take the lock if it is free, renew it if it is ours; tell whether we lead now."""
        try:
            if self._renew(keys=[self.key], args=[self.identity, self.ttl_ms]):
                return True
            return bool(self.connection.set(self.key, self.identity, nx=True, px=self.ttl_ms))
        except (redis.RedisError, OSError):
            # Without Redis we cannot prove we lead; stop firing rather than risk two leaders.
            return False

    def release(self) -> None:
        """Give the lock up so a standby takes over at once."""
        with contextlib.suppress(redis.RedisError, OSError):
            self._release(keys=[self.key], args=[self.identity])

    def holder(self) -> str | None:
        """Return who leads now, if anyone."""
        value = self.connection.get(self.key)
        return value.decode() if value else None
