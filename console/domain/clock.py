"""Injected time: services ask a clock instead of the system, so tests move time."""

import time
from datetime import UTC, datetime, timedelta


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


class Clock:
    """Tell the current time; the real one reads the system clock."""

    def __call__(self) -> datetime:
        return utcnow()

    def sleep(self, seconds: float) -> None:
        """Wait while time passes (a pause between tries)."""
        time.sleep(seconds)


SystemClock = Clock


class FrozenClock(Clock):
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None):
        self._now = start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move time forward by some seconds."""
        self._now += timedelta(seconds=seconds)
        return self._now

    def sleep(self, seconds: float) -> None:
        """Let the time pass at once: a pause between tries costs a test nothing, and its tries are still apart."""
        self.advance(seconds)

    def set(self, moment: datetime) -> None:
        """Jump to a given moment."""
        self._now = moment


SYSTEM_CLOCK = Clock()
