"""Read runs for the console: filtered, newest first, one keyset page at a time; one run with its timeline."""

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from sqlalchemy import Text, and_, cast, exists, func, or_, select
from sqlalchemy.orm import joinedload

from console.db.intervals import seconds_between
from console.domain.ids import MAX_ID
from console.domain.secrets import mask_fields
from console.extensions import db
from console.models import AttemptDiagnostics, DeadLetter, Run, RunEvent, Task, Tenant
from console.models.runs import LIVE, RARE, error_code_is, live, rare
from console.services.engine import diagnostics as attempt_diagnostics
from console.services.engine.control import get_run
from console.services.errors import InvalidInput
from console.services.inputs import is_digits
from console.services.scheduling import sla

PAGE_SIZE = 50
# A text search looks at this many run ids per page at most, so a rare word never scans the whole table.
TEXT_WINDOW = 20_000
EVENT_LIMIT = 1000


@dataclass(frozen=True)
class RunFilters:
    """What the runs list is narrowed to; empty fields do not filter."""

    tenant_id: int | None = None
    task_id: int | None = None
    statuses: tuple[str, ...] = ()
    created_from: datetime | None = None
    created_to: datetime | None = None
    error_code: str = ""
    text: str = ""
    # A handler's runs submitted without a task, matched exactly (a Reports row "handler (no task)"); `text` would
    # also find longer handlers' and tasks' runs.
    handler: str = ""
    # What Reports figures count: runs with a series that failed for good, whatever they are now (Execution
    # success), runs whose first series failed at least once (Automatic retry success), and a task's runs whose first
    # attempt started later than its start limit (a task row's Late starts).
    failed: bool = False
    retried: bool = False
    late: bool = False
    duplicated: bool = False  # a handler success beyond the first (Duplicate execution)
    conflicted: bool = False  # a firing deferred or skipped for a conflict (Conflict early warning)
    ended_from: datetime | None = None  # ended at or after (the Overview's counters of the last 24 h)
    # A series of it ended in [series_from, series_to): the one `failed` asks for, or the first with `retried` (what
    # the Reports figures count in a period, whenever the run was created).
    series_from: datetime | None = None
    series_to: datetime | None = None


@dataclass
class RunPage:
    runs: list[Run]
    # Pass as ?before= to continue with older runs; None when there is nothing older to look at.
    next_before: int | None = None
    # A text search that ran out of its id window before filling the page: the ids it looked at (low, high).
    searched: tuple[int, int] | None = None
    filters: RunFilters = field(default_factory=RunFilters)
    # Runs in a later series (a replay's, a manual retry's): when its first attempt started, None while it waits.
    # started_at stays the first series', so the list shows these in its place.
    series_starts: dict[int, datetime | None] = field(default_factory=dict)
    # Runs compensated since: when their handler succeeded, which their Duration runs to (not the undo's end).
    succeeded_at: dict[int, datetime] = field(default_factory=dict)
    named_run: int | None = None  # the run a text search of its id ("4048", "#4048") names, when the caller sees it


def apply(query, filters: RunFilters, scope: int | None):
    """Narrow a select over Run to the filters and the caller's tenant scope."""
    if scope is not None:
        query = query.where(Run.tenant_id == scope)
    if filters.tenant_id is not None:
        query = query.where(Run.tenant_id == filters.tenant_id)
    if filters.task_id is not None:
        query = query.where(Run.task_id == filters.task_id)
    if filters.statuses:
        query = query.where(Run.status.in_(filters.statuses))
        if set(filters.statuses) <= set(LIVE):  # live statuses only: their partial indexes may serve
            query = query.where(live())
        elif set(filters.statuses) <= set(RARE):
            query = query.where(rare())
    if filters.created_from is not None:
        query = query.where(Run.created_at >= filters.created_from)
    if filters.created_to is not None:
        query = query.where(Run.created_at < filters.created_to)
    if filters.error_code:
        query = query.where(error_code_is(filters.error_code))
    if filters.handler:
        query = query.where(Run.handler == filters.handler, Run.task_id.is_(None))
    within = (filters.series_from, filters.series_to)
    if filters.failed:
        query = query.where(_attempt_ended("failed", "dead", within=within))
    if filters.retried:
        # Named by their failures (a tenth of the endings), then each asked by its own timeline whether its first
        # series ended in the period: every ending of a week read as a list took 0.9 s at 300,000 runs.
        query = query.where(_attempt_ended("retry_wait", "failed", "dead", series=1, within=(None, within[1])))
        if any(within):
            query = query.where(_ended_in_its_timeline("succeeded", "failed", "dead", series=1, within=within))
    elif any(within) and not filters.failed:
        query = query.where(_attempt_ended("succeeded", "failed", "dead", within=within))
    if filters.late:
        query = query.where(*late_start(filters.task_id))
    if filters.duplicated:
        query = query.where(_duplicated())
    if filters.ended_from is not None:
        query = query.where(Run.finished_at >= filters.ended_from)
    if filters.conflicted:
        query = query.where(Run.task_id.is_not(None), Run.scheduled_for.is_not(None),
                            Run.id.in_(select(RunEvent.run_id).where(conflict_move(RunEvent))))
    return query


def conflict_move(event):
    """The timeline rows written when a firing is deferred or skipped for a conflict: a mutex (forbid skipped it,
    replace cancelled the run it displaced), an execution window, the tenant's queue quota or a quota class's slots."""
    return or_(and_(event.kind == "submitted", event.reason.in_(("window", "quota"))),
               and_(event.kind == "cancelled", event.reason.in_(("mutex_forbid", "replaced"))),
               and_(event.kind == "deferred", event.reason == "quota_class"),
               event.kind == "replaced")


# The timeline conditions below name the runs whose events match (`Run.id IN (…)`), read once through the (kind, at)
# index: as a correlated EXISTS, SQLite answered each run with that index, every matching event of the period per
# run, and the Runs list behind a Reports figure took minutes at 300,000 runs (session 45).


def _attempt_ended(*kinds: str, series: int | None = None, within: tuple = (None, None)):
    """Runs with an attempt that ended in one of these moves (in this series, at a moment in [start, end) when given),
    read from their timelines."""
    ended = select(RunEvent.run_id).where(RunEvent.from_status == "running", RunEvent.kind.in_(kinds))
    start, end = within
    if start is not None:
        ended = ended.where(RunEvent.at >= start)
    if end is not None:
        ended = ended.where(RunEvent.at < end)
    return Run.id.in_(ended if series is None else ended.where(RunEvent.series == series))


def _ended_in_its_timeline(*kinds: str, series: int, within: tuple):
    """As _attempt_ended, asked of each run's own timeline (by run_id): for runs another condition names already."""
    start, end = within
    ended = exists().where(RunEvent.run_id == Run.id, RunEvent.series == series, RunEvent.from_status == "running",
                           _kind_in(*kinds))
    if start is not None:
        ended = ended.where(RunEvent.at >= start)
    return ended if end is None else ended.where(RunEvent.at < end)


def _duplicated():
    """Runs whose handler succeeded more than once: a success after an attempt given up, or two recorded."""
    return Run.id.in_(select(RunEvent.run_id).where(RunEvent.kind.in_(("succeeded", "stale_success")))
                      .group_by(RunEvent.run_id).having(func.count() > 1))


HANDLER_WITHOUT_TASK = "a handler's runs without a task: drop the task (its runs are listed by the task)"
LATE_NEEDS_TASK = "late starts are a task's: choose the task (its start limit decides what is late)"


def late_start(task_id: int | None) -> tuple:
    """Return the conditions of a task's runs whose first attempt started later than its start limit."""
    task = db.session.get(Task, task_id) if task_id is not None else None
    if task is None:
        raise InvalidInput(LATE_NEEDS_TASK, "task")
    due = func.coalesce(Run.due_at, Run.scheduled_for)
    return (Run.task_id == task.id, Run.started_at.is_not(None), due.is_not(None),
            seconds_between(Run.started_at, due) > sla.start_limit(task))


def start_limit_of(task_id: int) -> int | None:
    """Return the task's start limit in seconds (None for no such task), for the page's words."""
    task = db.session.get(Task, task_id)
    return None if task is None else sla.start_limit(task)


def _by_time(filters: RunFilters) -> bool:
    """Tell whether to list newest-created first through the created_at index rather than by id."""
    # An error code or task has its own index in id order, far more selective than a time range;
    # a text search is bounded by an id window already.
    return bool(filters.created_from or filters.created_to) and not (
        filters.text or filters.error_code or filters.task_id is not None)


def page(filters: RunFilters, *, scope: int | None, before: int | None = None, limit: int = PAGE_SIZE,
         text_window: int = TEXT_WINDOW) -> RunPage:
    """Return one page of runs, newest first, and where to continue."""
    query = apply(select(Run), filters, scope).options(joinedload(Run.tenant), joinedload(Run.task))
    order = (Run.id.desc(),)
    if _by_time(filters):
        # Walk the created_at index instead of sorting every run of a long time range by id.
        order = (Run.created_at.desc(), Run.id.desc())
        cursor = db.session.execute(select(Run.created_at).where(Run.id == before)).scalar() if before else None
        if cursor is not None:
            query = query.where(Run.created_at <= cursor, or_(Run.created_at < cursor, Run.id < before))
        elif before:
            query = query.where(Run.id < before)
    elif before:
        query = query.where(Run.id < before)
    low = None
    if filters.text:
        # The text matches inside free-form columns no index can serve, so bound the scan by id.
        high = before or (db.session.execute(select(func.max(Run.id))).scalar() or 0) + 1
        low = max(high - text_window, 1)
        plain, in_json = _text_forms(filters.text)
        query = query.where(Run.id >= low, or_(
            *(column.icontains(form, autoescape=True) for column in (Run.handler, Run.idempotency_key,
                                                                     Run.error_message) for form in plain),
            # A value of its params (an order id, a customer's email), as stored: JSON text, non-ASCII escaped.
            *(cast(Run.params, Text).icontains(form, autoescape=True) for form in in_json)))
    rows = db.session.execute(query.order_by(*order).limit(limit + 1)).scalars().all()
    shown, next_before, searched = rows, None, None
    if len(rows) > limit:
        shown, next_before = rows[:limit], rows[limit - 1].id
    elif low is not None and low > 1:
        next_before, searched = low, (low, high - 1)
    if filters.text:
        shown = [run for run in shown if not _only_a_secret_matches(run, filters.text)]
    return RunPage(shown, next_before, searched, filters=filters, series_starts=series_starts(shown),
                   succeeded_at=succeeded_at(shown), named_run=_named_run(filters.text, scope))


def _text_forms(text: str) -> tuple[list[str], list[str]]:
    """Return the text as written and in lower case (SQLite's case-blind match folds ASCII only: "ZÜRICH" missed a
    stored "Zürich"; helper 141), and those as JSON writes them inside a string too (non-ASCII as \\u escapes)."""
    plain = list(dict.fromkeys((text, text.lower())))
    return plain, list(dict.fromkeys([*plain, *(json.dumps(form)[1:-1] for form in plain)]))


def _only_a_secret_matches(run: Run, text: str) -> bool:
    """Tell whether a run matched a text search by a secret param's value alone: every page masks those, so listing
    it would tell anyone searching that a guessed token is some run's."""
    wanted = text.casefold()
    if any(wanted in (value or "").casefold() for value in (run.handler, run.idempotency_key, run.error_message)):
        return False
    written = json.dumps(run.params, ensure_ascii=False).casefold()
    return wanted in written and wanted not in json.dumps(mask_fields(run.params), ensure_ascii=False).casefold()


def _named_run(text: str, scope: int | None) -> int | None:
    """Return the run a search of its id names ("4048", "#4048"), if there is one the caller may see."""
    match = re.fullmatch(r"#?([0-9]{1,10})", text.strip())
    if not match or int(match.group(1)) > MAX_ID:
        return None
    query = select(Run.id).where(Run.id == int(match.group(1)))
    if scope is not None:
        query = query.where(Run.tenant_id == scope)
    return db.session.execute(query).scalar()


# Statuses a run can reach after its handler succeeded: being undone, undone, or its undo failed (dead, and then
# perhaps resolved by a person). Its finished_at is then the undo's end, not the handler's.
UNDONE = ("compensating", "compensated", "compensation_failed", "dead", "resolved")


def _kind_in(*kinds: str):
    """A timeline row of these kinds, said so that no index on the kind serves it: these reads name their runs, and
    SQLite (without statistics, which a connection reads only when it opens) took the (kind, at) index, reading
    every `succeeded` event there is: 0.4 s a Runs page of dead runs at 300,000 runs (helper 129)."""
    return RunEvent.kind.concat("").in_(kinds)


def succeeded_at(runs: list[Run]) -> dict[int, datetime]:
    """When the handler of each run that was undone since (or whose undo failed) succeeded, in its current series."""
    undone = [run.id for run in runs if run.status in UNDONE]
    if not undone:
        return {}
    return dict(db.session.execute(select(RunEvent.run_id, func.max(RunEvent.at)).join(Run, Run.id == RunEvent.run_id)
                                   .where(RunEvent.run_id.in_(undone), _kind_in("succeeded"),
                                          RunEvent.series == Run.series).group_by(RunEvent.run_id)).all())


def series_starts(runs: list[Run]) -> dict[int, datetime | None]:
    """When each run in a later series started it (None: not yet), read from the timelines of those runs only."""
    later = [run.id for run in runs if run.series > 1]
    if not later:
        return {}
    started = dict(db.session.execute(
        select(RunEvent.run_id, func.min(RunEvent.at)).join(Run, Run.id == RunEvent.run_id)
        .where(RunEvent.run_id.in_(later), _kind_in("running"), RunEvent.series == Run.series)
        .group_by(RunEvent.run_id)).all())
    return {run_id: started.get(run_id) for run_id in later}


COUNT_CAP = 10_000


def count(filters: RunFilters, *, scope: int | None, cap: int = COUNT_CAP) -> int | None:
    """Count the runs the filters select, reading at most cap + 1 ids; None for a text search (it reads a window)."""
    if filters.text:
        return None
    inner = apply(select(Run.id), filters, scope).limit(cap + 1)
    return db.session.execute(select(func.count()).select_from(inner.subquery())).scalar_one()


@dataclass
class RunDetail:
    run: Run
    events: list[RunEvent]
    hidden_events: int
    dead_letters: list[DeadLetter]
    # A failed attempt's traceback and log lines, by the id of the event that ended the attempt.
    diagnostics: dict[int, AttemptDiagnostics] = field(default_factory=dict)

    @property
    def unstarted_series(self) -> int | None:
        """Return the new series (a replay's or a manual retry's) with no attempt yet, else None."""
        # Until its first attempt starts, the run's start time and worker are still an earlier series'.
        return self.run.series if self.run.series > 1 and self.run.attempt == 0 else None

    @property
    def series_started_at(self) -> datetime | None:
        """Return when a later series' first attempt started (the run's started_at stays its first series')."""
        if self.run.series == 1 or self.run.attempt == 0:
            return None
        return next((event.at for event in self.events if event.kind == "running" and event.series == self.run.series
                     and event.attempt == 1), None)

    @cached_property
    def submitted(self) -> RunEvent | None:
        """Return the run's first event, its submission (read when the timeline shown starts later)."""
        if not self.hidden_events:
            return next((event for event in self.events if event.kind == "submitted"), None)
        return db.session.execute(select(RunEvent).where(RunEvent.run_id == self.run.id, RunEvent.kind == "submitted")
                                  .order_by(RunEvent.id).limit(1)).scalar()

    @cached_property
    def deferred_into_window(self) -> bool:
        """Whether its planner deferred it into its execution window (its due_at is the opening, not a jitter)."""
        return self.run.due_at is not None and self.submitted is not None and self.submitted.reason == "window"

    @cached_property
    def imported(self) -> dict | None:
        """Return where an imported run came from (source, job id, function, queue, meta), as its import kept it."""
        if self.run.source != "import" or self.submitted is None:
            return None
        return (self.submitted.data or {}).get("imported")

    @cached_property
    def succeeded_at(self) -> datetime | None:
        """Return when the handler succeeded, for a run compensated since (its finished_at is the undo's end)."""
        return succeeded_at([self.run]).get(self.run.id)


def detail(run_id: int, scope: int | None, event_limit: int = EVENT_LIMIT) -> RunDetail:
    """Return a run visible to this scope with its timeline (oldest first) and dead letters; NotFound otherwise."""
    run = get_run(run_id, scope)
    newest = db.session.execute(select(RunEvent).where(RunEvent.run_id == run.id).order_by(RunEvent.id.desc())
                                .limit(event_limit + 1)).scalars().all()
    hidden = 0
    if len(newest) > event_limit:
        newest = newest[:event_limit]
        hidden = db.session.execute(select(func.count()).select_from(RunEvent).where(
            RunEvent.run_id == run.id)).scalar_one() - event_limit
    letters = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == run.id)
                                 .order_by(DeadLetter.id.desc()).limit(20)).scalars().all()
    events = list(reversed(newest))
    return RunDetail(run, events, hidden, letters, _attach_diagnostics(run.id, events))


def _attach_diagnostics(run_id: int, events: list[RunEvent]) -> dict[int, AttemptDiagnostics]:
    """Put each attempt's diagnostics beside the event that ended it (the first one leaving `running`), and each
    failed undo try's beside its own event (kept in its data)."""
    found = attempt_diagnostics.of_run(run_id)
    placed = {}
    for event in events:
        key = (event.series, event.attempt)
        if event.from_status == "running" and key in found:
            placed[event.id] = found.pop(key)
        elif event.kind == "compensation_attempt_failed" and (event.data or {}).get("traceback"):
            kept = event.data
            placed[event.id] = attempt_diagnostics.Diagnostics(kept["traceback"], kept.get("log_lines") or [])
    return placed


def tenant_options(scope: int | None) -> list[Tenant]:
    """Return the tenants a person may filter by."""
    query = select(Tenant).order_by(Tenant.name)
    if scope is not None:
        query = query.where(Tenant.id == scope)
    return db.session.execute(query).scalars().all()


def task_options(scope: int | None, limit: int = 500, asked: str = "") -> list[Task]:
    """Return the tasks a person may filter by (deleted ones too: their runs remain), by tenant and name, and the
    task a filter asks for by id when it is past the first `limit` of them (a task page's runs link named one the
    filter then refused as one they cannot see)."""
    query = select(Task).options(joinedload(Task.tenant)).join(Tenant, Tenant.id == Task.tenant_id)
    if scope is not None:
        query = query.where(Task.tenant_id == scope)
    found = db.session.execute(query.order_by(Tenant.name, Task.name).limit(limit)).scalars().all()
    if is_digits(asked) and len(found) == limit and int(asked) <= MAX_ID and all(t.id != int(asked) for t in found):
        found += db.session.execute(query.where(Task.id == int(asked))).scalars().all()
    return found
