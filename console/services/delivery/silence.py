"""Channels that gave no answer: not waited on again for a while, so one hanging receiver delays no other channel.

Kept in the deliverer's process (the app's extensions): a channel that timed out is "silent" for SILENT_S; messages
due meanwhile record it as not tried and come due again when the silence ends, when the first of them tries it
(one wait a SILENT_S, not one a message). Any answer from it, or a test sent from its page, ends the silence.
"""

import threading
from datetime import datetime, timedelta

from flask import current_app

SILENT_S = 60


class Silence:
    def __init__(self):
        self._lock = threading.Lock()
        self._silent: dict[str, tuple[datetime, str]] = {}  # channel -> (until, what happened)

    def why(self, name: str, now: datetime) -> str | None:
        """Say why the channel is not to be waited on now (None: try it)."""
        with self._lock:
            until, what = self._silent.get(name, (None, None))
        return what if until is not None and until > now else None

    def until(self, name: str) -> datetime | None:
        with self._lock:
            return self._silent.get(name, (None, None))[0]

    def timed_out(self, name: str, error: str, message_id: int, now: datetime) -> None:
        with self._lock:
            self._silent[name] = (now + timedelta(seconds=SILENT_S),
                                  f"{error} for message #{message_id} at {now:%H:%M:%S} UTC")

    def answered(self, name: str) -> None:
        with self._lock:
            self._silent.pop(name, None)


def of_app() -> Silence:
    """Return this process's record of silent channels (each app its own, so tests never share one)."""
    return current_app.extensions.setdefault("rebound_delivery_silence", Silence())
