"""`task-dryrun`: forecast every firing in a horizon and report conflicts before they happen."""

from collections import Counter, defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select

from console.domain import cron
from console.domain.cron import jitter_offset
from console.domain.windows import Window, WindowSpans
from console.extensions import db
from console.models import QuotaClass, Run, Task, Tenant
from console.services.policies import versions as policies
from console.services.scheduling import reservations

MAX_FIRINGS_PER_TASK = 20_000
# What the planner does when a firing finds its mutex key held (planner._rules), by the firing task's policy: held
# by another task's run, or by the same task's run from an earlier firing, still going (the planner checks every
# active run of the key, the task's own included).
CONSEQUENCES = {"forbid": "second firing skipped", "replace": "first run cancelled", "allow": "both run"}
OWN_CONSEQUENCES = {"forbid": "next firing skipped", "replace": "earlier run cancelled", "allow": "both run"}


@dataclass
class Forecast:
    start: datetime
    end: datetime
    firings: int = 0
    tasks: int = 0
    mutex_overlaps: list[dict] = field(default_factory=list)
    quota_overflows: list[dict] = field(default_factory=list)
    # Minutes in which a quota class's tasks are expected to run more at once than its max_running.
    class_overflows: list[dict] = field(default_factory=list)
    outside_window: list[dict] = field(default_factory=list)
    crowded_minutes: list[dict] = field(default_factory=list)
    # Capacity reservations in force at some moment of the horizon (see scheduling/reservations.py).
    reservations: list[dict] = field(default_factory=list)
    # Tasks whose firings reached MAX_FIRINGS_PER_TASK before the horizon: nothing of theirs after `until` is counted.
    cut_short: list[dict] = field(default_factory=list)
    # (kind, tenant id, task id or 0, nominal minute) of each conflict named, for `warnings.record`.
    warnings: list[tuple[str, int, int, datetime]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "tasks": self.tasks,
                "firings": self.firings, "mutex_overlaps": self.mutex_overlaps,
                "quota_overflows": self.quota_overflows, "class_overflows": self.class_overflows,
                "outside_window": self.outside_window,
                "crowded_minutes": self.crowded_minutes, "reservations": self.reservations,
                "cut_short": self.cut_short}


def expected_duration(task: Task) -> tuple[float, str]:
    """Return the p95 duration of the task's recent runs, or its timeout when it has no history."""
    rows = db.session.execute(select(Run.started_at, Run.finished_at).where(
        Run.task_id == task.id, Run.status == "succeeded", Run.started_at.is_not(None))
        .order_by(Run.id.desc()).limit(200)).all()
    durations = sorted((f - s).total_seconds() for s, f in rows if f and s)
    if durations:
        return durations[min(len(durations) - 1, int(0.95 * len(durations)))], "p95"
    return float(policies.effective(task.policy_id, task.policy_overrides)[1].timeout_s), "timeout"


def forecast(now: datetime, hours: float = 24, tenant: str | None = None, task_id: int | None = None,
             crowded_threshold: int = 50, only: Collection[int] | None = None) -> Forecast:
    """Forecast firings from now over `hours` and list what will collide (`only`: these task ids)."""
    end = now + timedelta(hours=hours)
    query = select(Task).where(Task.cron.is_not(None), Task.paused.is_(False), Task.deleted_at.is_(None))
    if tenant:
        query = query.join(Tenant).where(Tenant.name == tenant)
    if task_id:
        query = query.where(Task.id == task_id)
    if only is not None:
        query = query.where(Task.id.in_(list(only)))
    result = Forecast(now, end)
    planned: list[_Firing] = []
    tenants = {t.id: t for t in db.session.execute(select(Tenant)).scalars()}
    for task in db.session.execute(query).scalars():
        result.tasks += 1
        duration, basis = expected_duration(task)
        offset = jitter_offset(task.id, task.jitter_s)
        window = WindowSpans(Window.from_mapping(task.window), now, end) if task.window else None
        schedule = cron.parse(task.cron, task.timezone)
        openings: set[datetime] = set()  # the planner makes one run per opening of the window (windows.opening_key)
        counted = 0
        for nominal in schedule.fires_between(now - offset, end - offset, MAX_FIRINGS_PER_TASK):
            start = nominal + offset
            result.firings += 1
            counted += 1
            if counted == MAX_FIRINGS_PER_TASK:
                # A year of an every-minute task stopped at 14 days, silently (helper 109): said, not hidden.
                result.cut_short.append({"task_id": task.id, "task": task.name, "firings": counted,
                                         "until": start.isoformat()})
            if window and (opening := window.next_opening(start)) != start:
                result.outside_window.append({"task_id": task.id, "task": task.name, "firing": start.isoformat(),
                                              "deferred_to": opening.isoformat()})
                result.warnings.append(("window", task.tenant_id, task.id, _minute(nominal)))
                start = opening
                if start in openings:
                    continue
                openings.add(start)
            planned.append(_Firing(task, nominal, start, start + timedelta(seconds=duration), basis))
    # The mutex first: a firing it skips never runs, and a run it cancels frees its slot early, before quotas count.
    result.mutex_overlaps = _overlaps(planned, result.warnings)
    per_minute: Counter = Counter()
    running: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    by_class: dict[str, list[tuple[datetime, datetime, Task, datetime]]] = defaultdict(list)
    for firing in planned:
        if firing.skipped:
            continue
        task = firing.task
        per_minute[_minute(firing.start)] += 1
        running[task.tenant_id].append((firing.start, firing.finish))
        if task.quota_class:
            by_class[task.quota_class].append((firing.start, firing.finish, task, firing.nominal))
    result.reservations = reservations.between(now, end, tenant)
    result.quota_overflows = _quota(running, tenants, result.warnings, _reserved_spans(result.reservations))
    result.class_overflows = _classes(by_class, result.warnings)
    result.crowded_minutes = [{"minute": minute.isoformat(), "starts": count}
                              for minute, count in sorted(per_minute.items()) if count >= crowded_threshold]
    return result


@dataclass
class _Firing:
    """One forecast firing: its task, cron time, expected run span, and what the mutex does to it."""

    task: Task
    nominal: datetime
    start: datetime
    finish: datetime  # moved earlier when a later firing's `replace` cancels the run
    basis: str  # what the expected duration is (p95 or timeout)
    skipped: bool = False  # a `forbid` firing that finds the key held: never runs


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def _overlaps(planned: list[_Firing], warnings: list) -> list[dict]:
    """Firings that find their mutex key held by a run expected to be still going, as the planner would meet them:
    a skipped firing holds nothing, a cancelled run holds nothing after it is cancelled. Marks what it skips."""
    by_mutex: dict[tuple[int, str], list[_Firing]] = defaultdict(list)
    for firing in planned:
        if firing.task.mutex_key:  # a tenant's own, as the planner holds it
            by_mutex[firing.task.tenant_id, firing.task.mutex_key].append(firing)
    found = []
    for (_, key), firings in by_mutex.items():
        # Firings at one moment go in task id order, as the planner fires each batch (planner.fire; the scheduler's
        # buffer gathers a second's firings into one batch).
        firings.sort(key=lambda firing: (firing.start, firing.task.id))
        holding: list[_Firing] = []
        for firing in firings:
            holding = [run for run in holding if run.finish > firing.start]
            if not holding:
                holding.append(firing)
                continue
            first, task = holding[-1], firing.task
            # Both sides: forbid skips the second firing, replace cancels the first run.
            warnings.append(("mutex", first.task.tenant_id, first.task.id, _minute(first.nominal)))
            warnings.append(("mutex", task.tenant_id, task.id, _minute(firing.nominal)))
            same_task = task.id == first.task.id
            found.append({"mutex_key": key, "first": f"{first.task.name} at {first.start.isoformat()}",
                          "second": f"{task.name} at {firing.start.isoformat()}",
                          "first_task_id": first.task.id, "first_at": first.start.isoformat(),
                          "second_task_id": task.id, "second_at": firing.start.isoformat(), "same_task": same_task,
                          "overlap_s": int((first.finish - firing.start).total_seconds()),
                          "duration_basis": first.basis,
                          "consequence": (OWN_CONSEQUENCES if same_task else CONSEQUENCES)[task.concurrency_policy]})
            if task.concurrency_policy == "forbid":
                firing.skipped = True
            elif task.concurrency_policy == "replace":
                for run in holding:
                    run.finish = firing.start
                holding = [firing]
            else:
                holding.append(firing)
    return found


def _reserved_spans(shown: list[dict]) -> dict[str, list[tuple[datetime, datetime, int]]]:
    spans: dict[str, list] = defaultdict(list)
    for r in shown:
        spans[r["tenant"]].append((datetime.fromisoformat(r["starts_at"]), datetime.fromisoformat(r["ends_at"]),
                                   r["running_slots"]))
    return spans


def _quota(running: dict, tenants: dict, warnings: list, reserved: dict | None = None) -> list[dict]:
    """Minutes in which a tenant is expected to run more at once than its max_running (or the slots it reserved)."""
    found = []
    for tenant_id, spans in running.items():
        own = (reserved or {}).get(tenants[tenant_id].name, [])
        points = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans])
        level, reported = 0, set()
        for moment, change in points:
            level += change
            minute = moment.replace(second=0, microsecond=0)
            # As at the claim: while a reservation holds, the tenant's quota is at least its reserved slots.
            limit = max(tenants[tenant_id].max_running, sum(n for s, e, n in own if s <= moment < e))
            if level > limit and minute not in reported:
                reported.add(minute)
                found.append({"tenant": tenants[tenant_id].name, "minute": minute.isoformat(),
                              "expected_running": level, "max_running": limit})
                warnings.append(("quota", tenant_id, 0, minute))
    return found


def _classes(by_class: dict, warnings: list) -> list[dict]:
    """Minutes in which a quota class's tasks are expected to run more at once than its max_running."""
    if not by_class:
        return []
    limits = dict(db.session.execute(select(QuotaClass.name, QuotaClass.max_running)
                                     .where(QuotaClass.name.in_(list(by_class)))).all())
    found = []
    for name, spans in sorted(by_class.items()):
        if name not in limits:
            continue
        # Ends before starts at the same moment: a run finishing as another starts frees its slot (as at the claim).
        points = sorted([(s, 1, task) for s, _, task, _ in spans] + [(f, -1, task) for _, f, task, _ in spans],
                        key=lambda point: (point[0], point[1]))
        starting = defaultdict(list)
        for start, _, task, nominal in spans:
            starting[_minute(start)].append((task, nominal))
        active: Counter = Counter()
        reported = set()
        for moment, change, task in points:
            active[task.name] += change
            level = sum(active.values())
            minute = _minute(moment)
            if change > 0 and level > limits[name] and minute not in reported:
                reported.add(minute)
                found.append({"quota_class": name, "minute": minute.isoformat(), "expected_running": level,
                              "max_running": limits[name], "tasks": sorted(n for n, k in active.items() if k > 0)})
                # Any of the firings starting then may be the one the claim defers (whichever is claimed last).
                warnings.extend(("quota_class", late.tenant_id, late.id, _minute(nominal))
                                for late, nominal in starting[minute])
    return found
