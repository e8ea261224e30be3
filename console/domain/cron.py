"""Cron schedules evaluated on the task's own wall clock, the way cron daemons treat DST.

Expressions are the classic 5 fields (minute hour day-of-month month day-of-week) or an @alias.
Choices a caller must know:

- Fields match local wall-clock minutes in the task's IANA zone, so `0 3 * * *` stays 03:00 local all year.
- Spring forward: a wall time the clock skips (02:30 when 02:00 jumps to 03:00) fires once, at the first
  instant after the gap (03:00 local); the day is never skipped.
- Fall back: a wall time shown twice fires at its first occurrence only, unless the minute or hour field is
  a wildcard (`*`, `*/n` or the full range). Like Vixie cron, such interval-like schedules fire in both
  passes, so `0 * * * *` runs at every real hour while `30 1 * * *` runs once.
- When day-of-month and day-of-week are both restricted (neither is literally `*`), a day matching either
  fires (Vixie/POSIX OR). `*/2` counts as restricted, unlike Vixie's "starts with *" quirk; croniter agrees.
- Day-of-week: 0 and 7 are Sunday; an open-ended `a/n` runs to 6, as in croniter (write `a-7/n` for Sunday).
- Day-of-month `L` is the month's last day (28–31), alone or in a list (`15,L`), as croniter and cron-descriptor read
  it: month-end work needed `28-31` and a check in the handler. The other Quartz letters (W, #, ?) are refused.
"""

import difflib
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import islice, takewhile
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cron_descriptor import ExpressionDescriptor, Options

_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, 1)}
_WEEKDAYS = {name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
# (name, low, high, names); day-of-week accepts 7 for Sunday and folds it to 0 after expansion.
_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _WEEKDAYS),
)
_ALIASES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_ITEM = re.compile(r"(?:(\*)|([A-Za-z0-9]+)(?:-([A-Za-z0-9]+))?)(?:/([A-Za-z0-9]*))?")
_QUARTZ = "; W, # and ? are Quartz extensions that classic cron does not support (L alone, in day-of-month, is)"
LAST_DAY = 32  # day-of-month `L`, the month's last day: a value past any day, so sets of days stay sets of ints
_MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# Offsets around one transition differ by at most this much (2 hours for double summer time); looking this far
# either side of a moment tells whether a transition is near and by how much the clock moves.
_SWING = timedelta(hours=3)
_HOUR = timedelta(hours=1)
# Parse rejects day sets that never occur, so a match comes within 8 years (Feb 29 around 2100).
_SEARCH_DAYS = 366 * 9


class CronError(ValueError):
    """A cron expression or time zone that cannot be used; `field` is "cron" or "timezone"."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


# Files in the zone database that are not zones: the host's own setting, the POSIX rules, a placeholder.
NOT_ZONES = {"localtime", "posixrules", "Factory"}


@lru_cache(maxsize=1)
def _zone_names() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()
            if name not in NOT_ZONES and not name.startswith(("posix/", "right/"))}


def load_zone(name: str) -> ZoneInfo:
    """Return the IANA time zone called `name`, or raise CronError suggesting the closest real one."""
    if isinstance(name, str) and name and name == name.strip() and _zone_names().get(name.lower()) == name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    close = difflib.get_close_matches(str(name).strip().lower(), _zone_names(), n=1)
    hint = f"did you mean {_zone_names()[close[0]]!r}?" if close else "use a name like 'Europe/Berlin' or 'UTC'"
    raise CronError("timezone", f"unknown IANA time zone {name!r}; {hint}")


def as_utc(moment: datetime) -> datetime:
    """Return an aware datetime converted to UTC; naive ones are refused rather than guessed."""
    if not isinstance(moment, datetime) or moment.utcoffset() is None:
        raise ValueError(f"expected a timezone-aware datetime, got {moment!r}")
    return moment.astimezone(UTC)


def wall_to_utc(wall: datetime, zone: ZoneInfo) -> datetime:
    """Return the first instant `zone`'s clock shows naive `wall`, or the end of the gap that skips it."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    # In a gap fold=0 reads the wall time with the old offset, which lands after fold=1 (PEP 495).
    if first <= second:
        return first
    # zoneinfo does not expose its transitions; bisect whole seconds for where the new offset starts.
    target = first.astimezone(zone).utcoffset()
    low, high = int(second.timestamp()), int(first.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).utcoffset() == target:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def _steady_offset(zone: ZoneInfo, start: datetime, end: datetime) -> timedelta | None:
    """Return the zone's UTC offset if it is the same from `start` to `end`, else None (a clock change between).

    Read hour by hour: no zone changes its clock twice within an hour (zoneinfo does not expose its transitions)."""
    offset, moment = start.astimezone(zone).utcoffset(), start
    while moment < end:
        moment = min(moment + _HOUR, end)
        if moment.astimezone(zone).utcoffset() != offset:
            return None
    return offset


def in_gap(wall: datetime, zone: ZoneInfo) -> bool:
    """Tell whether naive `wall` is a time `zone`'s clock skips (a spring-forward gap)."""
    # In a gap fold=0 reads the wall time with the old offset, which lands after fold=1 (PEP 495).
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC) > wall.replace(tzinfo=zone, fold=1).astimezone(UTC)


def _split(expression: str) -> list[str]:
    if not isinstance(expression, str) or not expression.strip():
        raise CronError("cron", "expression is empty; write 5 fields like '30 2 * * *' or an alias like '@daily'")
    text = expression.strip()
    if text.startswith("@"):
        alias = text.lower()
        if alias == "@reboot":
            raise CronError("cron", "@reboot fires at daemon start, not on a schedule; use a time such as '@daily'")
        if alias not in _ALIASES:
            raise CronError("cron", f"unknown alias {text!r}; use one of {', '.join(_ALIASES)}")
        text = _ALIASES[alias]
    fields = text.split()
    if len(fields) != 5:
        extra = "; seconds and year fields are not supported" if len(fields) in (6, 7) else ""
        layout = "minute hour day-of-month month day-of-week"
        raise CronError("cron", f"expected 5 fields ({layout}), got {len(fields)}{extra}")
    return fields


def _number(token: str, position: int) -> int:
    name, low, high, names = _FIELDS[position - 1]
    where = f"field {position} ({name})"
    if token.upper() in names:
        return names[token.upper()]
    if not (token.isascii() and token.isdigit()):
        hint = f" or a name like {next(iter(names))}" if names else ""
        quartz = _QUARTZ if set(token.upper()) & set("LW") else ""
        raise CronError("cron", f"{where} value {token!r} is not a number{hint}{quartz}")
    if not low <= int(token) <= high:
        raise CronError("cron", f"{where} value {int(token)} is out of range {low}-{high}")
    return int(token)


def _parse_field(text: str, position: int) -> frozenset[int]:
    name, low, high, _ = _FIELDS[position - 1]
    where = f"field {position} ({name})"
    values: set[int] = set()
    for item in text.split(","):
        if len(item) > 24:
            raise CronError("cron", f"{where} has {item[:24]!r}…: no cron item is that long")
        if position == 3 and item.upper() == "L":
            values.add(LAST_DAY)
            continue
        match = _ITEM.fullmatch(item)
        if not match:
            quartz = _QUARTZ if set(item) & set("#?") else ""
            expected = "*, a value, a range a-b, a step like */5, or a list a,b"
            raise CronError("cron", f"{where} has {item!r}, expected {expected}{quartz}")
        star, first, last, step = match.groups()
        top = 6 if position == 5 else high
        start = low if star else _number(first, position)
        stop = _number(last, position) if last else (top if star or step is not None else start)
        if start > stop:
            fix = f"split it, e.g. {first}-{high},{low}-{last}"
            raise CronError("cron", f"{where} range {first}-{last} runs backwards; {fix}")
        if step is not None and not (step.isascii() and step.isdigit() and int(step) >= 1):
            raise CronError("cron", f"{where} step {step!r} in {item!r} must be a whole number of at least 1")
        if step is not None and int(step) > top - low:
            raise CronError("cron", f"{where} step {int(step)} in {item!r} spans the whole field ({low}-{top}): "
                                    f"it would fire only at {start}; write {start} instead")
        values.update(range(start, stop + 1, int(step) if step else 1))
    return frozenset(value % 7 for value in values) if position == 5 else frozenset(values)


def parse(expression: str, timezone: str = "UTC") -> "CronSchedule":
    """Parse a 5-field crontab line or @alias evaluated in IANA `timezone`, raising CronError if unusable."""
    fields = _split(expression)
    minutes, hours, days, months, weekdays = (_parse_field(text, i) for i, text in enumerate(fields, 1))
    days_any, weekdays_any = fields[2] == "*", fields[4] == "*"
    # Only when day-of-month alone decides can the day set be impossible ("31" in "FEB,APR"); refuse it
    # rather than search for years.
    if weekdays_any and not any(day == LAST_DAY or day <= _MONTH_DAYS[month] for day in days for month in months):
        names = ", ".join(name for name, number in _MONTHS.items() if number in months)
        shown = ",".join(map(str, sorted(days)))
        raise CronError("cron", f"day-of-month {shown} never occurs in {names}; pick days that exist in those months")
    load_zone(timezone)
    wild = fields[0].startswith("*") or fields[1].startswith("*") or len(minutes) == 60 or len(hours) == 24
    sets = (minutes, hours, days, months, weekdays)
    return CronSchedule(expression.strip(), timezone, *sets, days_any, weekdays_any, wild)


@dataclass(frozen=True)
class CronSchedule:
    """A parsed cron expression bound to a time zone; build it with parse()."""

    expression: str
    timezone: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday, as in cron
    days_any: bool
    weekdays_any: bool
    wild: bool  # fires in both passes of a repeated hour

    def next_after(self, moment: datetime) -> datetime:
        """Return the first firing strictly after `moment`, as an aware UTC datetime."""
        moment, zone = as_utc(moment), ZoneInfo(self.timezone)
        wall = moment.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0, fold=0)
        # First occurrences (and gap ends) rise with the wall clock, so the first one past `moment` is the earliest.
        # An interval (a wildcard minute or hour) skips the wall times a spring-forward gap removes, as Vixie cron
        # does: moved to the gap's end, "30 * * * *" fired at 02:00 and 02:30 BST, 30 minutes apart (helper 106).
        first = next(((w, t) for w in self._walls(wall) if (t := wall_to_utc(w, zone)) > moment
                      and not (self.wild and in_gap(w, zone))), None)
        if first is None:
            raise ValueError(f"{self.expression!r} has no firing after {moment.isoformat()}")
        shift = abs((moment + _SWING).astimezone(zone).utcoffset() - (moment - _SWING).astimezone(zone).utcoffset())
        if not (self.wild and shift):
            return first[1]
        # Near a fall-back the second pass of an earlier wall time can come before that, e.g. the second
        # 01:00 after 01:15 of the first pass; only wall times before `first`'s can beat it.
        for earlier in self._walls(wall - shift):
            if earlier >= first[0]:
                break
            second = earlier.replace(tzinfo=zone, fold=1).astimezone(UTC)
            if second > moment and second > wall_to_utc(earlier, zone):
                return min(second, first[1])
        return first[1]

    def next_n(self, moment: datetime, n: int) -> list[datetime]:
        """Return the next `n` firings after `moment` in the task's time zone, for display with their offset."""
        zone = ZoneInfo(self.timezone)
        return [instant.astimezone(zone) for instant in islice(self._following(moment), n)]

    def fires_between(self, start: datetime, end: datetime, max_count: int = 1000) -> Iterator[datetime]:
        """Yield UTC firings after `start` up to and including `end`, at most `max_count` of them."""
        start, end = as_utc(start), as_utc(end)
        offset = _steady_offset(ZoneInfo(self.timezone), start - _SWING, end + _SWING)
        if offset is not None:
            return islice(self._steady(start, end, offset), max_count)
        return takewhile(lambda instant: instant <= end, islice(self._following(start), max_count))

    def _steady(self, start: datetime, end: datetime, offset: timedelta) -> Iterator[datetime]:
        """Yield the firings in (start, end] of a stretch with no clock change: each wall time once, at one offset.

        What next_after answers there, without its search for the first wall time after each firing again: a 7-day
        forecast of 50 tasks took 10 s (helper 151)."""
        for wall in self._walls((start + offset).replace(tzinfo=None, second=0, microsecond=0)):
            instant = (wall - offset).replace(tzinfo=UTC)
            if instant > end:
                return
            if instant > start:
                yield instant

    def _following(self, moment: datetime) -> Iterator[datetime]:
        while True:
            moment = self.next_after(moment)
            yield moment

    def _matches_day(self, day: date) -> bool:
        in_month = day.day in self.days or (LAST_DAY in self.days and (day + timedelta(days=1)).day == 1)
        in_week = (day.weekday() + 1) % 7 in self.weekdays
        if self.days_any or self.weekdays_any:
            return in_month and in_week
        return in_month or in_week

    def _walls(self, start: datetime) -> Iterator[datetime]:
        hours, minutes = sorted(self.hours), sorted(self.minutes)
        day, last = start.date(), start.date() + timedelta(days=_SEARCH_DAYS)
        while day <= last:
            if day.month not in self.months:
                # Jump to the 1st of next month instead of walking the days of a month that never fires.
                day = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
                continue
            if self._matches_day(day):
                for hour in hours:
                    if (day, hour) < (start.date(), start.hour):
                        continue
                    for minute in minutes:
                        wall = datetime.combine(day, time(hour, minute))
                        if wall >= start:
                            yield wall
            day += timedelta(days=1)


_WORDS = Options()
_WORDS.use_24hour_time_format = True  # as every time in the console is written
_HOUR_SPAN = re.compile(r"between (\d\d):00 and (\d\d):59")
# "At 0, 20, and 40 minutes past the hour, at 01:00" read as one firing at 01:00 (helper 106).
_MINUTES_AT_AN_HOUR = re.compile(r"^At [\d, and]+ minutes past the hour, at (\d\d):00")
_LAST_IN_A_LIST = re.compile(r"\bL of the month")


def describe(expression: str) -> str:
    """Return the expression in words ("At 02:30, only on Monday"), or the expression if that fails."""
    try:
        text = _ALIASES.get(expression.strip().lower(), " ".join(expression.split()))
        words = ExpressionDescriptor(_for_words(text), _WORDS).get_description()
        return _exact_words(text, words)
    except Exception:  # a label must never break a page, and the raw expression is still true
        return expression


def _for_words(text: str) -> str:
    """Write day-of-week 7 as 0 and drop repeats, so "0,7" reads "only on Sunday", not "Sunday and Sunday"; and a
    day-of-month list's L last, where the words can name it ("on day 15 and the last day of the month")."""
    fields = text.split()
    if len(fields) == 5 and "," in fields[4]:
        days = ["0" if day == "7" else day for day in fields[4].split(",")]
        fields[4] = ",".join(dict.fromkeys(days))
    if len(fields) == 5:
        days = ["L" if day.upper() == "L" else day for day in fields[2].split(",")]
        fields[2] = ",".join(sorted(days, key=lambda day: day == "L"))
        if fields[4] in ("0-7", "0-6", "1-7"):  # every day: not "Sunday through Sunday"
            fields[4] = "*"
    return " ".join(fields)


def _exact_words(text: str, words: str) -> str:
    """Mend what the library's words make inexact: an hour range's last firing, a minute step that skips."""
    fields = text.split()
    if len(fields) != 5:
        return words
    words = _LAST_IN_A_LIST.sub("the last day of the month", words)  # the library says "on day 15 and L of the month"
    minute = fields[0]
    if minute.isdigit():  # "0 9-17": the last firing is 17:00, not "between 09:00 and 17:59"
        words = _HOUR_SPAN.sub(lambda m: f"between {m[1]}:{int(minute):02d} and {m[2]}:{int(minute):02d}", words)
    hour = fields[1]
    if "," in minute and all(part.isdigit() for part in minute.split(",")) and hour.isdigit():
        times = [f"{int(hour):02d}:{int(part):02d}" for part in sorted(set(minute.split(",")), key=int)]
        words = _MINUTES_AT_AN_HOUR.sub(f"At {', '.join(times[:-1])} and {times[-1]}", words)
    step = int(minute[2:]) if minute.startswith("*/") and minute[2:].isdigit() else 0
    if 0 < step < 60 and 60 % step:  # */7 restarts at :00 each hour: the last gap is shorter
        last = 59 // step * step
        words += f" (at :00, :{step:02d} … :{last:02d} past each hour, so :{last:02d} to :00 is {60 - last} min)"
    hours = int(hour[2:]) if hour.startswith("*/") and hour[2:].isdigit() else 0
    if 0 < hours < 24 and 24 % hours:  # */7 restarts at 00 each day: "every 7 hours" hid a 3-hour gap (helper 106)
        last = 23 // hours * hours
        words += f" (hours 00, {hours:02d} … {last:02d} of each day, so {last:02d} to 00 is {24 - last} h)"
    return words


def jitter_offset(task_id: int, jitter_s: int) -> timedelta:
    """Return the task's fixed stagger within its jitter: stable, so forecasts and firings agree."""
    if not jitter_s:
        return timedelta(0)
    digest = int(hashlib.sha1(str(task_id).encode()).hexdigest()[:8], 16)
    return timedelta(milliseconds=digest % (jitter_s * 1000))
