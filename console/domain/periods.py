"""Report periods: the last 24 h (whole hours), the last 7 / 30 / 90 days (whole UTC days), or a date range."""

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from console.domain.words import plural

PRESETS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30),
           "90d": timedelta(days=90)}
DEFAULT = "7d"
LONGEST = timedelta(days=366)
HOUR = timedelta(hours=1)
MINUTE = "%Y-%m-%dT%H:%M"  # how `since` and `until` are written (a chart point's hour or day), UTC
# Earlier or later is a typo; the bounds keep a period's end (the next midnight) and the period before it inside what
# a datetime holds (years 1 to 9999).
EARLIEST, LATEST = date(1970, 1, 1), date(9998, 12, 31)


class PeriodError(ValueError):
    """A period that cannot be reported on; the message says what to fix."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Period:
    start: datetime
    end: datetime  # exclusive
    name: str = ""  # the preset, or "" for a date range

    @property
    def length(self) -> timedelta:
        return self.end - self.start

    @property
    def previous(self) -> "Period":
        """The period of the same length just before this one."""
        return Period(self.start - self.length, self.start, self.name)

    @property
    def hourly(self) -> bool:
        """Trends of two days or less are drawn per hour, longer ones per day."""
        return self.length <= timedelta(hours=48)

    @property
    def previous_words(self) -> str:
        """Name the previous period as a sentence reads it: "the day before", "the 7 days before", "the 12 h before"."""
        days, hours = self.length.days, self.length.seconds // 3600
        return f"the {f'{hours} h' if not days else 'day' if days == 1 else plural(days, 'day')} before"

    def as_dict(self) -> dict:
        return {"from": self.start.isoformat(), "to": self.end.isoformat(), "name": self.name or None,
                "hours": int(self.length.total_seconds() // 3600)}


def preset(name: str, now: datetime) -> Period:
    """Return the last 24 h in whole hours (the current one included), or the last 7, 30 or 90 UTC days (today's
    included, so far)."""
    if name not in PRESETS:
        raise PeriodError(f"period is one of {', '.join(PRESETS)}", "period")
    if PRESETS[name] <= timedelta(hours=48):
        end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    else:
        # Whole days: a long report reads one row per task and day, never the hours at its edges.
        end = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    return Period(end - PRESETS[name], end, name)


def between(first: date, last: date) -> Period:
    """Return the whole UTC days from `first` to `last`, both included."""
    if last < first:
        raise PeriodError("'to' must be on or after 'from'", "to")
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    end = datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)
    if end - start > LONGEST:
        raise PeriodError(f"a report covers at most {LONGEST.days} days", "from")
    return Period(start, end)


def parse_day(raw: str, field: str) -> date:
    """Read a YYYY-MM-DD date, or raise a PeriodError naming the field."""
    try:
        day = date.fromisoformat(raw.strip())
    except ValueError:
        raise PeriodError(f"{field} is a date like 2026-03-01", field) from None
    if not EARLIEST <= day <= LATEST:
        raise PeriodError(f"{field} is a date from {EARLIEST} to {LATEST}", field)
    return day


def parse_minute(raw: str, field: str) -> datetime:
    """Read a UTC minute written YYYY-MM-DDTHH:MM, or raise a PeriodError naming the field."""
    try:
        moment = datetime.strptime(raw.strip(), MINUTE).replace(tzinfo=UTC)
    except ValueError:
        raise PeriodError(f"{field} is a UTC time like 2026-03-01T09:00", field) from None
    if not EARLIEST <= moment.date() <= LATEST:
        raise PeriodError(f"{field} is a time from {EARLIEST} to {LATEST}", field)
    return moment


def span(since: str, until: str) -> Period:
    """Return [since, until) in UTC minutes, widened to the whole hours it touches: what a chart point's hour or day
    opens. The figures are read from hourly rollups, so 05:30-06:15 is counted, and said, as 05:00-07:00."""
    for given, field in ((since, "since"), (until, "until")):
        if given:  # a bad one is named first: "give both" read as if it had not been given
            parse_minute(given, field)
    if not (since and until):
        raise PeriodError("give both 'since' and 'until' (UTC times like 2026-03-01T09:00)",
                          "until" if since else "since")
    start, end = parse_minute(since, "since"), parse_minute(until, "until")
    if end <= start:
        raise PeriodError("'until' must be after 'since'", "until")
    start = start.replace(minute=0)
    end = end.replace(minute=0) + (HOUR if end.minute else timedelta())
    if end - start > LONGEST:
        raise PeriodError(f"a report covers at most {LONGEST.days} days", "since")
    return Period(start, end)


def choose(name: str | None, first: str | None, last: str | None, now: datetime, since: str | None = None,
           until: str | None = None) -> Period:
    """Return the period asked for: a span of minutes if either end is given, else a date range if either end is
    given, else a preset (default 7 d)."""
    if since or until:
        return _begun(span(since or "", until or ""), now, "since")
    if first or last:
        for given, field in ((first, "from"), (last, "to")):
            if given:  # a bad one is named first: "give both" read as if it had not been given
                parse_day(given, field)
        if not (first and last):
            raise PeriodError("give both 'from' and 'to' (dates like 2026-03-01)", "to" if first else "from")
        return _begun(between(parse_day(first, "from"), parse_day(last, "to")), now, "from")
    return preset(name or DEFAULT, now)


def _begun(period: Period, now: datetime, field: str) -> Period:
    """Refuse a period that has not begun: nothing happened in it, and "the days before" would be ahead too."""
    if period.start > now:
        raise PeriodError(f"{field} is after now ({now:%Y-%m-%d %H:%M} UTC): nothing has happened then yet; choose "
                          "a period that has begun", field)
    return period


def through_named_day(text: str, when: datetime) -> datetime:
    """Return the end bound `text` means: a bare date (2026-12-01) is through that day (its next midnight), as the
    pages' "to" fields take it; a date and time is that moment."""
    try:
        date.fromisoformat(text.strip())
    except ValueError:
        return when
    return when + timedelta(days=1)
