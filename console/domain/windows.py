"""Weekly time windows ("mon-fri 08:00-18:00 Europe/Berlin") that say when scheduled work may start.

Days are Python weekdays, 0 = Monday .. 6 = Sunday (cron counts from Sunday; this does not). A window is
half-open, [start, end), on the local wall clock. An end at or before the start runs past midnight and
belongs to the day it opens: fri 22:00-06:00 closes on Saturday at 06:00; start == end is a full 24 hours.
Wall times follow the cron module's DST rule: one the clock skips means the first instant after the gap,
one it shows twice means its first occurrence.
"""

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from console.domain.cron import CronError, as_utc, load_zone, wall_to_utc

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_KEYS = ("days", "start", "end", "timezone")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")


class WindowError(ValueError):
    """A window setting that cannot be used, naming the field to fix (window.start, window.days, ...)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def _parse_days(value: object) -> frozenset[int]:
    hint = 'days must be a list of each day, like ["mon", "tue", "wed", "thu", "fri"] or [0, 1, 2, 3, 4] (0 = Monday)'
    # A bare string would silently become a list of characters.
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple | set | frozenset | range):
        raise WindowError("window.days", f"{hint}, got {value!r}")
    if not value:
        raise WindowError("window.days", f"{hint}; list at least one day")
    days = set()
    for item in value:
        name = item.strip().lower() if isinstance(item, str) else None
        if name in DAY_NAMES or name in _FULL_NAMES:
            days.add(DAY_NAMES.index(name[:3]))
        # bool is an int subclass, but `true` for a day is a typo.
        elif isinstance(item, int) and not isinstance(item, bool) and 0 <= item <= 6:
            days.add(item)
        else:
            raise WindowError("window.days", f"unknown day {item!r}; use mon..sun or 0 (Monday) to 6 (Sunday)")
    return frozenset(days)


def _parse_clock(value: object, key: str) -> time:
    if isinstance(value, time):
        return value
    match = _CLOCK.fullmatch(value.strip()) if isinstance(value, str) else None
    hour, minute = (int(match[1]), int(match[2])) if match else (-1, -1)
    # 24:00 is a natural way to say "until midnight"; it is the same wall time as 00:00 the next day.
    if key == "end" and (hour, minute) == (24, 0):
        return time(0, 0)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        # YAML 1.1 reads an unquoted 18:00 as the base-60 number 1080.
        yaml = "; quote it in YAML, where an unquoted 18:00 reads as a number" if isinstance(value, int) else ""
        raise WindowError(f"window.{key}", f'{key} must be a 24-hour time HH:MM such as "08:00", got {value!r}{yaml}')
    return time(hour, minute)


@dataclass(frozen=True)
class Window:
    """The weekly hours during which work may start, in one IANA time zone."""

    days: frozenset[int]
    start: time
    end: time
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        object.__setattr__(self, "days", _parse_days(self.days))
        for key in ("start", "end"):
            if not isinstance(getattr(self, key), time) or getattr(self, key).tzinfo is not None:
                raise WindowError(f"window.{key}", f"{key} must be a naive datetime.time, got {getattr(self, key)!r}")
        try:
            load_zone(self.timezone)
        except CronError as exc:
            raise WindowError("window.timezone", exc.message) from None

    @classmethod
    def from_mapping(cls, data: Mapping) -> "Window":
        """Build a window from {"days", "start", "end", "timezone"}; days default to all, timezone to UTC."""
        if not isinstance(data, Mapping):
            raise WindowError("window", f"window must be a mapping of {', '.join(_KEYS)}, got {type(data).__name__}")
        for key in data:
            if key not in _KEYS:
                raise WindowError(f"window.{key}", f"unknown setting {key!r}; known: {', '.join(_KEYS)}")
        for key in ("start", "end"):
            if key not in data:
                raise WindowError(f"window.{key}", f'{key} is required, a 24-hour time such as "08:00"')
        start, end = _parse_clock(data["start"], "start"), _parse_clock(data["end"], "end")
        return cls(data.get("days", range(7)), start, end, data.get("timezone", "UTC"))

    def to_dict(self) -> dict:
        """Return the JSON-able form that from_mapping reads back."""
        return {
            "days": [DAY_NAMES[day] for day in sorted(self.days)],
            "start": self.start.strftime("%H:%M"),
            "end": self.end.strftime("%H:%M"),
            "timezone": self.timezone,
        }

    def contains(self, moment: datetime) -> bool:
        """Tell whether the window is open at `moment` (an aware datetime)."""
        moment = as_utc(moment)
        today = moment.astimezone(ZoneInfo(self.timezone)).date()
        # A window opened yesterday may still be open after midnight.
        for day in (today - timedelta(days=1), today):
            if day.weekday() in self.days:
                opens, closes = self._span(day)
                if opens <= moment < closes:
                    return True
        return False

    def next_opening(self, moment: datetime) -> datetime:
        """Return `moment` (in UTC) if the window is open then, else the UTC instant it next opens."""
        moment = as_utc(moment)
        if self.contains(moment):
            return moment
        today = moment.astimezone(ZoneInfo(self.timezone)).date()
        # days is never empty, so an opening comes within a week.
        for offset in range(8):
            day = today + timedelta(days=offset)
            if day.weekday() in self.days and (opens := self._span(day)[0]) > moment:
                return opens
        raise AssertionError("a window with at least one day opens within a week")

    def _span(self, day: date) -> tuple[datetime, datetime]:
        zone = ZoneInfo(self.timezone)
        close_day = day + timedelta(days=1) if self.end <= self.start else day
        opens = wall_to_utc(datetime.combine(day, self.start), zone)
        # On a spring-forward day a window inside the gap (02:00-02:30) opens and closes at the same instant.
        return opens, wall_to_utc(datetime.combine(close_day, self.end), zone)


class WindowSpans:
    """A window's open spans over a horizon, for asking about many moments in it (a forecast's firings)."""

    def __init__(self, window: Window, start: datetime, end: datetime):
        zone = ZoneInfo(window.timezone)
        # From the day before (a span opened then may still be open) to a week after (the last moment's opening).
        day, last = as_utc(start).astimezone(zone).date() - timedelta(days=1), as_utc(end).astimezone(zone).date()
        self._spans = []
        while day <= last + timedelta(days=8):
            if day.weekday() in window.days:
                self._spans.append(window._span(day))
            day += timedelta(days=1)
        self._opens = [opens for opens, _ in self._spans]

    def next_opening(self, moment: datetime) -> datetime:
        """Return `moment` if the window is open then, else when it next opens: Window.next_opening, for a moment
        between the horizon's start and end."""
        after = bisect.bisect_right(self._opens, moment)
        # A span is at most a day long (25 hours across a clock change), so only the two before can hold it.
        if any(opens <= moment < closes for opens, closes in self._spans[max(0, after - 2):after]):
            return moment
        return self._opens[after]


def opening_keys(task_id: int) -> str:
    """Return how the idempotency keys of a task's runs waiting for an opening of its window begin."""
    return f"task:{task_id}:window:"


def opening_key(task_id: int, opening) -> str:
    """Name the run a task's cron firings wait in for one opening of its window: one run, however many fired."""
    return f"{opening_keys(task_id)}{opening.isoformat()}"
