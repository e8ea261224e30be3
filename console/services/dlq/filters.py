"""Which dead letters a person asked for: the DLQ page's filters, turned into one bounded WHERE clause."""

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import exists, func, select
from sqlalchemy.orm import aliased

from console.domain.periods import EARLIEST, LATEST, through_named_day
from console.extensions import db
from console.models import DeadLetter, Run, Tenant
from console.services.delivery.channel_report import ALERTED_LETTER, timed_alerts
from console.services.engine import handler_kinds
from console.services.errors import InvalidInput
from console.services.inputs import is_digits, row_id
from console.services.people import tenants

STATUSES = ("open", "replayed", "discarded", "resolved")
ANY = "any"  # every status: what a period's "dead letters created" counts
AGES = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7)}
# A text search reads messages row by row; it looks through this many of the newest dead letters of its status at a
# time.
SEARCH_WINDOW = 10_000
MAX_QUERY_CHARS = 200
MAX_CODE_CHARS, MAX_TENANT_CHARS = 80, 64
FINGERPRINT = re.compile(r"[0-9a-f]{1,32}")
MOMENT = "%Y-%m-%dT%H:%M"
UNTASKED = "untasked:"
# Each span a Reports figure opens the letters of: (from, before) in UTC minutes.
PERIODS = (("since", "until"), ("recovered_since", "recovered_until"), ("alerted_since", "alerted_until"))


@dataclass(frozen=True)
class Filters:
    """What the person asked to see; every field is a GET parameter of the DLQ page."""

    q: str = ""
    task: str = ""  # "<task id>", "handler:<name>", or "untasked:<name>" (that handler's runs without a task)
    tenant: str = ""
    age: str = ""
    code: str = ""
    status: str = "open"
    group: str = ""
    since: str = ""  # created at or after, UTC "YYYY-MM-DDTHH:MM" (a Reports period)
    until: str = ""  # created before
    # Recovered: its run succeeded at or after / before these UTC minutes, after the letter (a Reports period).
    recovered_since: str = ""
    recovered_until: str = ""
    # Alerted: its own alert was delivered at or after / before these UTC minutes (what Reports' alert latency times).
    alerted_since: str = ""
    alerted_until: str = ""

    @classmethod
    def parse(cls, args: Mapping) -> "Filters":
        """Read filters from request arguments; unknown values fall back to 'any'."""
        def text(name: str, limit: int = 120) -> str:
            return str(args.get(name) or "").strip()[:limit]

        status = text("status")
        filters = cls(q=text("q", MAX_QUERY_CHARS), task=text("task") or handler_task(text("handler")),
                      tenant=text("tenant", MAX_TENANT_CHARS),
                      age=text("age") if text("age") in AGES else "", code=text("code", MAX_CODE_CHARS),
                      status=status if status in (*STATUSES, ANY) else "open",
                      group=text("group", 32) if FINGERPRINT.fullmatch(text("group", 32)) else "",
                      since=moment(text("since", 40)), until=moment(text("until", 40), end=True),
                      recovered_since=moment(text("recovered_since", 40)),
                      recovered_until=moment(text("recovered_until", 40), end=True),
                      alerted_since=moment(text("alerted_since", 40)),
                      alerted_until=moment(text("alerted_until", 40), end=True))
        return filters

    def with_status(self, status: str) -> "Filters":
        return replace(self, status=status)

    def args(self) -> dict:
        """Return the non-default values, for links and hidden fields."""
        values = {"q": self.q, "task": self.task, "tenant": self.tenant, "age": self.age, "code": self.code,
                  "status": "" if self.status == "open" else self.status, "group": self.group, "since": self.since,
                  "until": self.until, "recovered_since": self.recovered_since,
                  "recovered_until": self.recovered_until, "alerted_since": self.alerted_since,
                  "alerted_until": self.alerted_until}
        return {key: value for key, value in values.items() if value}

    def args_without(self, *keys: str) -> dict:
        return {name: value for name, value in self.args().items() if name not in keys}

    @property
    def narrowed(self) -> bool:
        """Tell whether anything beyond the status narrows the selection."""
        return bool(self.q or self.task or self.tenant or self.age or self.code or self.group or self.since
                    or self.until or self.recovered or self.alerted)

    @property
    def recovered(self) -> bool:
        """Tell whether only letters whose run then succeeded (in a span) are asked for."""
        return bool(self.recovered_since or self.recovered_until)

    @property
    def alerted(self) -> bool:
        """Tell whether only letters whose own alert was delivered (in a span) are asked for."""
        return bool(self.alerted_since or self.alerted_until)

    def to_dict(self) -> dict:
        return {"q": self.q, "task": self.task, "tenant": self.tenant, "age": self.age, "code": self.code,
                "status": self.status, "group": self.group, "since": self.since, "until": self.until,
                "recovered_since": self.recovered_since, "recovered_until": self.recovered_until,
                "alerted_since": self.alerted_since, "alerted_until": self.alerted_until}

    def describe(self, group_words: str | None = None, count: int | None = None) -> str:
        """Say in words which dead letters the filters select ("3 open dead letters with code x" with a count);
        group_words names the group better than its fingerprint (its error code and message)."""
        noun = "dead letter" if count == 1 else "dead letters"
        parts = [] if count is None else [f"{count:,}"]
        parts.append(noun if self.status == ANY else f"{self.status} {noun}")
        labels = {"q": "matching '{}'", "code": "with code {}", "task": "of {}", "tenant": "of tenant {}",
                  "age": "older than {}", "group": "in group {}", "since": "created from {} UTC",
                  "until": "created before {} UTC", "recovered_since": "recovered from {} UTC",
                  "recovered_until": "recovered before {} UTC", "alerted_since": "alerted from {} UTC",
                  "alerted_until": "alerted before {} UTC"}
        shown = {**self.to_dict(), "group": group_words or self.group if self.group else "",
                 "task": untasked_words(self.task) or self.task}
        parts += [labels[key].format(value) for key, value in shown.items() if key in labels and value]
        return " ".join(parts)


def handler_task(handler: str) -> str:
    """Return the task filter a `handler` argument means (`handler:<kind>:<name>`, a bare name a Python handler's), as
    the API names it: on the page it was dropped unsaid and every letter was listed (helper 153)."""
    if not handler:
        return ""
    try:
        return "handler:{}:{}".format(*handler_kinds.parse(handler))
    except InvalidInput:
        return f"handler:{handler}"  # a name no handler has: it matches nothing, which the page then shows


def untasked_words(task: str) -> str | None:
    """Name an "untasked:<handler>" filter as people read it, or None for any other."""
    return f"{task.removeprefix(UNTASKED)} without a task" if task.startswith(UNTASKED) else None


def check(args: Mapping) -> None:
    """Raise InvalidInput for a filter value parse() would quietly drop: what is acted on (a replay of all that
    match) must be exactly what was asked for, never more."""
    texts = {key: str(value).strip() for key, value in args.items() if value not in (None, "")}
    if texts.get("status", "open") not in (*STATUSES, ANY):
        raise InvalidInput(f"status must be one of {', '.join((*STATUSES, ANY))}", "status")
    for key in (key for span in PERIODS for key in span):
        if key in texts and (problem := moment_problem(texts[key])):
            raise InvalidInput(f"{key}={texts[key][:40]} {problem}", key)
    if problem := task_problem(texts.get("task", "")):
        raise InvalidInput(problem, "task")
    if texts.get("age", "1h") not in AGES:
        raise InvalidInput(f"age must be one of {', '.join(AGES)} (older than)", "age")
    if not FINGERPRINT.fullmatch(texts.get("group", "0")):
        raise InvalidInput("group is an error fingerprint: up to 32 hex digits", "group")
    for key, limit in (("q", MAX_QUERY_CHARS), ("code", MAX_CODE_CHARS), ("tenant", MAX_TENANT_CHARS)):
        if len(texts.get(key, "")) > limit:  # cut short, it would match more than was asked
            raise InvalidInput(f"{key} is at most {limit} characters", key)


def refused(args: Mapping) -> list[str]:
    """Say what in the filters parse() drops or can never match, for the page to show."""
    said = [problem] if (problem := task_problem(str(args.get("task") or "").strip()[:120])) else []
    if str(args.get("task") or "").strip() and str(args.get("handler") or "").strip():
        said.append("filter by handler or by task, not both: the task is used and the handler is ignored")
    for name, allowed in (("status", (*STATUSES, ANY)), ("age", AGES)):
        given = str(args.get(name) or "").strip()[:40]
        if given and given not in allowed:
            said.append(f"{name}={given} is not one of {', '.join(allowed)}, so it is ignored")
    group = str(args.get("group") or "").strip()[:40]
    if group and not FINGERPRINT.fullmatch(group):
        said.append(f"group={group} is not an error fingerprint (up to 32 hex digits), so it is ignored")
    for first, last in PERIODS:
        for name in (first, last):
            given = str(args.get(name) or "").strip()[:40]
            if given and (problem := moment_problem(given)):
                said.append(f"{name}={given} {problem}, so it is ignored")
        since, until = moment(str(args.get(first) or "")[:40]), moment(str(args.get(last) or "")[:40], end=True)
        if since and until and until <= since:
            said.append(f"'{last}' ({until}) is not after '{first}' ({since}): no dead letter can match")
    return said


def task_problem(task: str) -> str | None:
    """Say why a task filter can name no task (it is not a whole number, or past any row id), or None."""
    if not task or task.startswith(("handler:", UNTASKED)):
        return None
    shown = task if len(task) <= 40 else f"{task[:40]}…"  # said back, not echoed whole (5,000 digits were)
    if not is_digits(task):
        return f"task={shown} is not a task id (a whole number)"
    try:
        row_id(task)
    except ValueError:
        return f"no task has id {shown}"
    return None


def moment_problem(text: str) -> str | None:
    """Say why a date and time cannot bound the filters, or None."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return "is not a date and time (YYYY-MM-DDTHH:MM in UTC, or with an offset such as +02:00)"
    # Earlier or later is a typo; the bounds keep it in UTC inside what a datetime holds (and in four digits).
    if not EARLIEST.year <= when.year <= LATEST.year:
        return f"is not between the years {EARLIEST.year} and {LATEST.year}"
    return None


def moment(text: str, *, end: bool = False) -> str:
    """Return a UTC moment as "YYYY-MM-DDTHH:MM" (with its seconds, and their fraction, when it has any: an API
    client pages by a letter's created_at), or "" for anything moment_problem refuses. An `end` given as a bare date
    is through that day."""
    if not text or moment_problem(text):
        return ""
    when = datetime.fromisoformat(text)
    when = when.astimezone(UTC) if when.tzinfo else when
    if end:
        when = through_named_day(text, when)
    return when.strftime(MOMENT + (":%S.%f" if when.microsecond else ":%S" if when.second else ""))


@dataclass(frozen=True)
class Bounds:
    """An id range and a moment, fixed when a bulk operation starts: later dead letters and passing time add
    nothing, and a text search covers the same window the page showed."""

    as_of: datetime
    min_id: int | None = None
    max_id: int | None = None


def search_floor(filters: Filters, tenant_id: int | None, before: int | None = None) -> int | None:
    """Return the lowest id a text search reads: it covers the newest SEARCH_WINDOW dead letters of the status asked
    (below `before`), found on the status index (every status: the primary key); None when it covers them all."""
    if not filters.q:
        return None
    # Search reads message text row by row: a window of ids bounds it, whatever the rest of the filter.
    query = select(DeadLetter.id)
    if filters.status != ANY:
        query = query.where(DeadLetter.status == filters.status)
    if tenant_id is not None:
        query = query.where(DeadLetter.tenant_id == tenant_id)
    if before:
        query = query.where(DeadLetter.id < before)
    query = query.order_by(DeadLetter.id.desc()).offset(SEARCH_WINDOW - 1).limit(1)
    return db.session.execute(query).scalar_one_or_none()


def _named_id(text: str) -> int | None:
    """Return the id a search names ("4048", "#4048"), or None: a run's id found nothing on the DLQ (helper 153)."""
    number = text.removeprefix("#")
    try:
        return row_id(number) if is_digits(number) else None
    except ValueError:
        return None


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _recovered(filters: Filters):
    """Letters whose run succeeded after them, within the span: what Reports counts as recovered."""
    run = aliased(Run)  # its own runs: a query that joins the letters' runs (workflow_steps) must not absorb it
    succeeded = exists().where(run.id == DeadLetter.run_id, run.status == "succeeded",
                               run.finished_at > DeadLetter.created_at)
    if filters.recovered_since:
        succeeded = succeeded.where(run.finished_at >= utc(filters.recovered_since))
    if filters.recovered_until:
        succeeded = succeeded.where(run.finished_at < utc(filters.recovered_until))
    return succeeded


def _alerted(filters: Filters):
    """Letters whose own alert was delivered within the span, by the rules Reports times alert latency with."""
    return DeadLetter.id.in_(select(ALERTED_LETTER).where(*timed_alerts(
        utc(filters.alerted_since) if filters.alerted_since else None,
        utc(filters.alerted_until) if filters.alerted_until else None)))


def utc(minute: str) -> datetime:
    """Return the aware UTC datetime of a moment as moment() writes it."""
    return datetime.fromisoformat(minute).replace(tzinfo=UTC)


def where(query, filters: Filters, tenant_id: int | None, now: datetime, min_id: int | None = None,
           max_id: int | None = None):
    """Apply the filters and the tenant scope; the status comes first so an index on it leads."""
    dl = DeadLetter
    if filters.status != ANY:
        query = query.where(dl.status == filters.status)
    if tenant_id is not None:
        tenants.keep_within(filters.tenant, tenant_id, "dead letters")
        query = query.where(dl.tenant_id == tenant_id)
    elif filters.tenant:
        query = query.where(dl.tenant_id == select(Tenant.id).where(Tenant.name == filters.tenant).scalar_subquery())
    if filters.task.startswith("handler:"):
        query = query.where(dl.handler == filters.task.removeprefix("handler:"))
    elif filters.task.startswith(UNTASKED):  # a Reports row "handler (no task)": not the tasks running it too
        query = query.where(dl.handler == filters.task.removeprefix(UNTASKED), dl.task_id.is_(None))
    elif filters.task:
        query = query.where(dl.task_id == (-1 if task_problem(filters.task) else int(filters.task)))
    if filters.code:  # in any case, as on the Runs page (codes are kept as raised: TIMEOUT, http_502)
        query = query.where(func.lower(dl.error_code) == func.lower(filters.code))
    if filters.group:
        query = query.where(dl.fingerprint == filters.group)
    if filters.age:
        query = query.where(dl.created_at < now - AGES[filters.age])
    if filters.since:
        query = query.where(dl.created_at >= utc(filters.since))
    if filters.until:
        query = query.where(dl.created_at < utc(filters.until))
    if filters.recovered:
        query = query.where(_recovered(filters))
    if filters.alerted:
        query = query.where(_alerted(filters))
    if filters.q:
        pattern = f"%{_escape_like(filters.q)}%"
        found = dl.error_message.ilike(pattern, escape="\\") | dl.error_code.ilike(pattern, escape="\\")
        if number := _named_id(filters.q):  # "4048" or "#4048": the letter, or the run's letters, of that id too
            found = found | (dl.id == number) | (dl.run_id == number)
        query = query.where(found)
    if min_id is not None:
        query = query.where(dl.id >= min_id)
    if max_id is not None:
        query = query.where(dl.id <= max_id)
    return query
