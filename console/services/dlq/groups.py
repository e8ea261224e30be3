"""The dead-letter queue as people read it: grouped by error, filtered, searched, counted."""

from dataclasses import dataclass, field, replace
from datetime import datetime

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import aliased, selectinload

from console.domain import deleted_names
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import shown_message
from console.extensions import db
from console.models import DeadLetter, Run, RunEvent, Task, Tenant, Workflow, WorkOrder
from console.services.dlq.filters import Bounds, Filters, search_floor, task_problem, where
from console.services.engine import compensation, handler_kinds, registry, waiting_fixes
from console.services.errors import NotFound
from console.services.inputs import is_digits
from console.services.scheduling import task_query

PAGE_SIZE = 50
GROUP_LIMIT = 50
# A group is (fingerprint, handler, tenant) rows merged in Python; this bounds how many rows that reads.
GROUP_ROWS_LIMIT = 5000
COUNT_CAP = 10_000
MAX_SELECTED = 500
# Letters parked for any other reason failed for good (non-retryable, manual intervention, a failed undo): replaying
# them sends the same input to the same code, so the page asks first.
RETRYABLE_REASONS = ("exhausted",)


def replay_caution(reason: str, handler: str = "") -> str:
    """Say what replaying one letter parked for this reason will likely do ('' for one that ran out of retries)."""
    if reason in RETRYABLE_REASONS:
        return ""
    if reason == "compensation_failed":
        return ("Its undo failed: a replay runs the handler itself again, not its undo (Retry the undo, on its run "
                "page, does that).")
    if handler and undo_offered(reason, handler):  # without a handler: whether it failed for good, only
        return ("Its error's severity 3 left it for a person, its undo not run: a replay runs the handler itself "
                "again (Run the undo, on its run page, undoes what it did instead).")
    return (f"It failed for good ({reason.replace('_', ' ')}), not by running out of retries: unless its cause was "
            "fixed, the same params to the same code will most likely fail the same way.")


@dataclass
class WorkOrderRef:
    id: int
    status: str
    title: str
    tenant: str


@dataclass
class Group:
    """Open dead letters that share an error fingerprint (same code, same message up to ids and numbers)."""

    fingerprint: str
    error_code: str | None
    count: int = 0
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    handlers: set[str] = field(default_factory=set)
    tenants: set[str] = field(default_factory=set)
    sample_id: int = 0
    # Its newest letters failed for good rather than by running out of retries. Read from the samples, not counted:
    # the grouping reads only its covering index, and one error (code and message) is classified alike each time.
    failed_for_good: bool = False
    workflow_steps: bool = False  # some are steps of saga workflows: a replay runs each alone
    sample_message: str = ""
    message: str = ""
    work_orders: list[WorkOrderRef] = field(default_factory=list)
    fixes_waiting: int = 0  # params fixes waiting for approval on its letters: a replay closes them
    # Its newest letter of each tenant, with its run's handler, tenant and policy: which breaker a replay waits for.
    newest_runs: list = field(default_factory=list)


@dataclass
class GroupPage:
    groups: list[Group]
    more: bool  # more groups after the ones shown
    total: int  # dead letters in all groups
    search_floor: int | None  # a search covered ids from here up only
    fixes_waiting: int = 0  # params fixes waiting for approval on the letters of all groups
    count: int = 0  # groups in all
    offset: int = 0  # groups before the ones shown (larger ones)


@dataclass
class EntryPage:
    entries: list
    next_before: int | None
    search_floor: int | None  # a search covered ids from here up only; older ones continue before it


def groups(filters: Filters, tenant_id: int | None, clock: Clock = SYSTEM_CLOCK, limit: int = GROUP_LIMIT,
           offset: int = 0) -> GroupPage:
    """Return the largest error groups (after the `offset` larger ones) with their handlers, tenants and work
    orders."""
    dl = DeadLetter
    # Grouped in the order of an index on (status, fingerprint, tenant_id, handler, ...), which covers it.
    query = select(dl.fingerprint, dl.tenant_id, dl.handler, func.max(dl.error_code), func.count(),
                   func.min(dl.created_at), func.max(dl.created_at), func.max(dl.id)).group_by(
        dl.fingerprint, dl.tenant_id, dl.handler)
    floor = search_floor(filters, tenant_id)
    now = clock()
    rows = db.session.execute(where(query, filters, tenant_id, now, floor).limit(GROUP_ROWS_LIMIT)).all()
    names = dict(db.session.execute(select(Tenant.id, Tenant.name)).all())
    merged: dict[str, Group] = {}
    # The newest dead letter per group and tenant: its work order is that tenant's for the group.
    samples: dict[str, dict[int, int]] = {}
    for fingerprint, tenant, handler, code, count, first, last, newest in rows:
        group = merged.setdefault(fingerprint, Group(fingerprint, code))
        group.count += count
        group.first_seen = min(first, group.first_seen or first)
        group.last_seen = max(last, group.last_seen or last)
        group.handlers.add(handler)
        group.tenants.add(names.get(tenant, str(tenant)))
        group.sample_id = max(group.sample_id, newest)
        per_tenant = samples.setdefault(fingerprint, {})
        per_tenant[tenant] = max(per_tenant.get(tenant, 0), newest)
    ordered = sorted(merged.values(), key=lambda g: (g.count, g.last_seen, g.fingerprint), reverse=True)
    # Past the last group (a link kept after letters were replayed): its last page, not an empty one.
    offset = min(max(offset, 0), max(len(ordered) - 1, 0) // limit * limit)
    shown = ordered[offset:offset + limit]
    sample_ids = [i for g in shown for i in samples[g.fingerprint].values()]
    details = {row.id: row for row in db.session.execute(
        select(dl.id, dl.error_message, dl.work_order_id, dl.reason, Run.workflow_id, dl.handler, dl.tenant_id,
               Run.policy_id, Run.policy_overrides)
        .join(Run, Run.id == dl.run_id).where(dl.id.in_(sample_ids)))}
    order_ids = {row.work_order_id for row in details.values() if row.work_order_id}
    orders = {order.id: order for order in db.session.execute(
        select(WorkOrder).where(WorkOrder.id.in_(order_ids))).scalars()} if order_ids else {}
    fixes = fixes_waiting(filters, tenant_id, Bounds(now, floor))
    for group in shown:
        group.fixes_waiting = fixes.get(group.fingerprint, 0)
        sample = details.get(group.sample_id)
        group.sample_message = (sample.error_message or "") if sample else ""
        group.message = shown_message(group.sample_message)
        newest = [details[i] for i in samples[group.fingerprint].values() if i in details]
        group.failed_for_good = any(row.reason not in RETRYABLE_REASONS for row in newest)
        # From the newest letters, as above; the replay itself counts them all before it asks (web/dlq/bulk.py).
        group.workflow_steps = any(row.workflow_id is not None for row in newest)
        group.newest_runs = newest
        found = {orders[details[i].work_order_id] for i in samples[group.fingerprint].values()
                 if i in details and details[i].work_order_id in orders}
        group.work_orders = [WorkOrderRef(o.id, o.status, o.title, names.get(o.tenant_id, str(o.tenant_id)))
                             for o in sorted(found, key=lambda o: o.id)]
    return GroupPage(shown, len(ordered) > offset + limit, sum(g.count for g in ordered), floor, sum(fixes.values()),
                     len(ordered), offset)


def window(filters: Filters, tenant_id: int | None, now: datetime) -> Bounds:
    """Fix the moment and the search window a page's counts share: a text search's floor is read once."""
    return Bounds(now, search_floor(filters, tenant_id))


def fixes_waiting(filters: Filters, tenant_id: int | None, bounds: Bounds) -> dict[str, int]:
    """Count the params fixes waiting for approval on the dead letters the filters select, by error group: a
    replay or discard of those letters closes them, and the page says so before."""
    letter_ids = waiting_fixes.letters(bounds.as_of)
    if not letter_ids:
        return {}
    query = select(DeadLetter.fingerprint, func.count()).where(DeadLetter.id.in_(letter_ids))
    return dict(db.session.execute(where(query, filters, tenant_id, bounds.as_of, bounds.min_id, bounds.max_id)
                                   .group_by(DeadLetter.fingerprint)).all())


def entries(filters: Filters, tenant_id: int | None, before: int | None = None, clock: Clock = SYSTEM_CLOCK,
            limit: int = PAGE_SIZE, within: Bounds | None = None) -> EntryPage:
    """Return one page of dead letters, newest first, and the id to continue before (None on the last page).

    `within`: the window the page's counts read (see window); the first page shares its search floor and newest id.
    """
    query = select(DeadLetter).order_by(DeadLetter.id.desc()).limit(limit + 1).options(
        selectinload(DeadLetter.run).selectinload(Run.workflow), selectinload(DeadLetter.tenant),
        selectinload(DeadLetter.work_order))  # a row's Replay names its run's workflow (a saga's step)
    if before:
        query = query.where(DeadLetter.id < before)
    floor = within.min_id if within is not None and not before else search_floor(filters, tenant_id, before)
    now = within.as_of if within is not None else clock()
    newest = within.max_id if within is not None else None
    rows = db.session.execute(where(query, filters, tenant_id, now, floor, newest)).scalars().all()
    if len(rows) > limit:
        return EntryPage(rows[:limit], rows[limit - 1].id, floor)
    # The search window ran out before the page filled: the next page searches the window below it.
    return EntryPage(rows, floor, floor)


def count_matching(filters: Filters, tenant_id: int | None, clock: Clock = SYSTEM_CLOCK,
                   cap: int | None = COUNT_CAP, bounds: Bounds | None = None) -> int:
    """Count the dead letters the filters select, reading at most cap + 1 rows (None: count them all)."""
    bounds = bounds or window(filters, tenant_id, clock())
    inner = where(select(DeadLetter.id), filters, tenant_id, bounds.as_of, bounds.min_id, bounds.max_id)
    if cap is not None:
        inner = inner.limit(cap + 1)
    return db.session.execute(select(func.count()).select_from(inner.subquery())).scalar_one()


def count_newer(filters: Filters, tenant_id: int | None, before: int, bounds: Bounds) -> int:
    """Count the selected dead letters above a page that starts below `before` (newest first), up to COUNT_CAP + 1."""
    return count_matching(filters, tenant_id, bounds=Bounds(bounds.as_of, min_id=before))


def count_non_retryable(filters: Filters, tenant_id: int | None, clock: Clock = SYSTEM_CLOCK,
                        cap: int = COUNT_CAP, bounds: Bounds | None = None) -> int:
    """Count the selected dead letters that failed for good (not by running out of retries), up to cap + 1."""
    bounds = bounds or window(filters, tenant_id, clock())
    inner = where(select(DeadLetter.id), filters, tenant_id, bounds.as_of, bounds.min_id, bounds.max_id).where(
        DeadLetter.reason.not_in(RETRYABLE_REASONS)).limit(cap + 1)
    return db.session.execute(select(func.count()).select_from(inner.subquery())).scalar_one()


@dataclass(frozen=True)
class WorkflowSteps:
    """How many of the selected dead letters are steps of saga workflows, and of those how many died undoing it."""

    steps: int
    undo_failed: int


def workflow_steps(filters: Filters, tenant_id: int | None, bounds: Bounds, cap: int = COUNT_CAP) -> WorkflowSteps:
    """Count the selected dead letters whose run is a workflow's step (up to cap + 1): a replay runs it alone."""
    # The workflows' runs read once from their partial index, so a letter outside them is not joined to its run
    # (100,000 open letters, none a step: 53 → 13 ms on SQLite; the DLQ list asks this on every load).
    stepping = aliased(Run)  # not the outer query's runs: a subquery of its own, read once
    in_workflows = select(stepping.id).where(stepping.workflow_id.is_not(None))
    steps = (select(Run.workflow_step, Workflow.failed_step).select_from(DeadLetter)
             .join(Run, Run.id == DeadLetter.run_id).join(Workflow, Workflow.id == Run.workflow_id)
             .where(DeadLetter.run_id.in_(in_workflows)))
    inner = where(steps, filters, tenant_id, bounds.as_of, bounds.min_id, bounds.max_id).limit(cap + 1).subquery()
    # console/domain/saga.py's undo_failed, as SQL: a step other than the one that failed died undoing itself.
    undo = case((and_(inner.c.failed_step.is_not(None), inner.c.workflow_step != inner.c.failed_step), 1), else_=0)
    found, undone = db.session.execute(select(func.count(), func.coalesce(func.sum(undo), 0)).select_from(inner)).one()
    return WorkflowSteps(found, undone)


def runs_behind(filters: Filters, tenant_id: int | None, bounds: Bounds, handlers: set[str],
                limit: int = 200) -> list:
    """Return the distinct (handler, tenant, policy) of the selected dead letters' runs of these handlers (those
    with a breaker open), at most `limit`: which breakers a replay of them would wait for (`OpenBreakers.of_group`)."""
    if not handlers:
        return []
    query = (select(Run.id, Run.handler, Run.tenant_id, Run.policy_id).select_from(DeadLetter)
             .join(Run, Run.id == DeadLetter.run_id).where(DeadLetter.handler.in_(sorted(handlers))))
    inner = where(query, filters, tenant_id, bounds.as_of, bounds.min_id, bounds.max_id).subquery()
    # The newest run of each (handler, tenant, policy), its overrides read after: PostgreSQL compares no JSON.
    newest = select(func.max(inner.c.id)).group_by(inner.c.handler, inner.c.tenant_id, inner.c.policy_id).limit(limit)
    return db.session.execute(select(Run.handler, Run.tenant_id, Run.policy_id, Run.policy_overrides)
                              .where(Run.id.in_(newest))).all()


def needs_explaining(filters: Filters, tenant_id: int | None, bounds: Bounds) -> bool:
    """Tell whether replaying all the filters select needs a page that says what it would do first: some failed for
    good (the same input is likely to fail the same way), or are workflows' steps (each runs alone)."""
    return bool(count_non_retryable(filters, tenant_id, bounds=bounds)
                or workflow_steps(filters, tenant_id, bounds).steps)


def bounds(filters: Filters, tenant_id: int | None, now: datetime) -> Bounds | None:
    """Fix what the filters select now (the search window, the newest id); None when they select nothing."""
    every = window(filters, tenant_id, now)
    newest = newest_id(filters, tenant_id, every)
    return replace(every, max_id=newest) if newest is not None else None


def newest_id(filters: Filters, tenant_id: int | None, within: Bounds) -> int | None:
    """Return the newest dead letter the filters select within a window (a page's: its search floor read once)."""
    query = where(select(DeadLetter.id), filters, tenant_id, within.as_of, within.min_id, within.max_id)
    return db.session.execute(query.order_by(DeadLetter.id.desc()).limit(1)).scalar_one_or_none()


def matching_ids(filters: Filters, tenant_id: int | None, bounds: Bounds, after_id: int, limit: int) -> list[int]:
    """Return the next ids (ascending, after after_id) the bounded filters select."""
    query = where(select(DeadLetter.id), filters, tenant_id, bounds.as_of, bounds.min_id, bounds.max_id)
    query = query.where(DeadLetter.id > after_id).order_by(DeadLetter.id).limit(limit)
    return list(db.session.execute(query).scalars())


def group_words(fingerprint: str, tenant_id: int | None) -> str | None:
    """Name an error group as people read it: its code and its message with the parts that vary between its letters
    replaced (as its header shows it), not its fingerprint, nor one letter's ids and addresses (helper 164)."""
    if not fingerprint:
        return None
    query = select(DeadLetter.error_code, DeadLetter.error_message).where(DeadLetter.fingerprint == fingerprint)
    if tenant_id is not None:
        query = query.where(DeadLetter.tenant_id == tenant_id)
    found = db.session.execute(query.order_by(DeadLetter.id.desc()).limit(1)).first()
    if found is None:
        return None
    message = shown_message(found.error_message.splitlines()[0])[:80] if found.error_message else "(no message)"
    return f"{found.error_code or 'unknown'} “{message}”"


def get(dead_letter_id: int, tenant_id: int | None = None) -> DeadLetter:
    """Return a dead letter visible to this tenant scope, or raise NotFound."""
    letter = db.session.get(DeadLetter, dead_letter_id)
    if letter is None or (tenant_id is not None and letter.tenant_id != tenant_id):
        raise NotFound(f"no dead letter with id {dead_letter_id}")
    return letter


def visible(ids: list[int], tenant_id: int | None) -> list[DeadLetter]:
    """Return the dead letters among ids that this tenant scope may see, by id."""
    query = select(DeadLetter).where(DeadLetter.id.in_(ids)).order_by(DeadLetter.id)
    if tenant_id is not None:
        query = query.where(DeadLetter.tenant_id == tenant_id)
    return list(db.session.execute(query).scalars())


def newest_open(*, tenant: str = "", error_code: str = "", handler: str = "", limit: int = 50) -> list[tuple]:
    """Return the newest open dead letters with their tenant's name (the CLI's list), narrowed as asked."""
    query = (select(DeadLetter, Tenant.name).join(Tenant, Tenant.id == DeadLetter.tenant_id)
             .where(DeadLetter.status == "open").order_by(DeadLetter.id.desc()).limit(limit))
    if tenant:
        query = query.where(Tenant.name == tenant)
    if error_code:  # in any case, as the API and the pages (codes are kept as raised: TIMEOUT, http_502)
        query = query.where(func.lower(DeadLetter.error_code) == error_code.strip().lower())
    if handler:  # a bare name is a Python handler's, as everywhere else (demo.flaky is python:demo.flaky)
        query = query.where(DeadLetter.handler == "{}:{}".format(*handler_kinds.parse(handler.strip())))
    return list(db.session.execute(query))


def replays(letters: list[DeadLetter]) -> dict[int, list[RunEvent]]:
    """Return, per dead letter, the replay events that started a new series of its run."""
    run_ids = {letter.run_id for letter in letters}
    if not run_ids:
        return {}
    events = db.session.execute(select(RunEvent).where(RunEvent.run_id.in_(run_ids),
                                                       RunEvent.kind == "replay_of_dead_letter")
                                .order_by(RunEvent.id)).scalars()
    found: dict[int, list[RunEvent]] = {}
    for event in events:
        letter_id = (event.data or {}).get("dead_letter_id")
        if letter_id is not None:
            found.setdefault(int(letter_id), []).append(event)
    return found


def task_names(letters: list[DeadLetter]) -> dict[int, str]:
    """Return the names of the tasks these dead letters came from."""
    ids = {letter.task_id for letter in letters if letter.task_id}
    if not ids:
        return {}
    return {task_id: deleted_names.shown(name)
            for task_id, name in db.session.execute(select(Task.id, Task.name).where(Task.id.in_(ids)))}


def undo_offered(reason: str, handler: str) -> bool:
    """Tell whether a letter's run can have its undo run by a person: its error's severity 3 left it for them and its
    handler has an undo step (a failed undo is offered again as its own case)."""
    return reason == "manual_intervention" and compensation.has_undo_step(handler)


def task_choices(tenant_id: int | None, limit: int = 500, asked: str = "") -> list[tuple[str, str]]:
    """Return (value, label) of the tasks a filter can pick, by name, and the task the filter asks for by id when
    they leave it out (deleted, or past the first `limit`): the select showed "any" while the filter held."""
    query = select(Task.id, Task.name, Tenant.name).join(Tenant, Task.tenant_id == Tenant.id)
    if tenant_id is not None:
        query = query.where(Task.tenant_id == tenant_id)
    rows = db.session.execute(query.where(Task.deleted_at.is_(None)).order_by(Task.name, Tenant.name)
                              .limit(limit)).all()
    if is_digits(asked) and not task_problem(asked) and all(str(row[0]) != asked for row in rows):
        rows += db.session.execute(query.where(Task.id == int(asked))).all()
    return [(str(task_id), deleted_names.shown(name) if tenant_id is not None
             else f"{deleted_names.shown(name)} · {tenant}") for task_id, name, tenant in rows]


def unseen_task(task: str, tenant_id: int | None) -> list[str]:
    """Say that a task filter's id names no task this person can see, deleted ones counted (their letters remain),
    or nothing: another tenant's task reads as no task at all, as on Runs, so its existence is not told."""
    if not task or task_problem(task) or not is_digits(task):  # a handler's filter, or said already
        return []
    return [] if task_query.can_see(int(task), tenant_id) else [f"no task with id {task} that you can see"]


def handler_choices(tenant_id: int | None = None, limit: int = 100) -> list[str]:
    """Return the handlers a filter can pick, in their stored 'kind:name' form: the registry's and the commands',
    and the plugins the scope's open letters name (plugins are open-ended: the list offered none of the plugin
    handlers most letters had; helper 112)."""
    plugins = (select(DeadLetter.handler).where(DeadLetter.status == "open", DeadLetter.handler.startswith("plugin:"))
               .group_by(DeadLetter.handler).order_by(DeadLetter.handler).limit(limit))
    if tenant_id is not None:
        plugins = plugins.where(DeadLetter.tenant_id == tenant_id)
    return ([f"python:{name}" for name in registry.names()]
            + [f"command:{name}" for name in handler_kinds.listed_commands()]
            + list(db.session.execute(plugins).scalars()))
