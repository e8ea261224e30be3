"""Fire tasks on demand: events from other services, and 'run now'."""

import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.windows import Window, opening_key, opening_keys
from console.extensions import db
from console.models import Run, Task, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.engine import queueing, transitions
from console.services.engine.submit import MAX_KEY, check_key_shape
from console.services.errors import InvalidInput
from console.services.inputs import params_too_large
from console.services.policies import versions as policies
from console.services.scheduling import event_receipts as receipts
from console.services.scheduling import planner

log = logging.getLogger("rebound.scheduler")

# A run's key holds "event:<task id>:" before the sender's key, within the column's 200 characters.
MAX_EVENT_KEY = MAX_KEY - len("event:2147483647:")


def on_event(tenant: Tenant, event_type: str, data, actor: Actor, clock: Clock = SYSTEM_CLOCK,
             idempotency_key=None) -> list:
    """Fire every enabled task of the tenant registered for this event, with `data` merged into its params; a paused
    or debounced one is answered as such. The same event sent again with the same idempotency key fires nothing:
    each task's run of it is answered `duplicate`."""
    if not isinstance(data, dict):
        raise InvalidInput("data must be a JSON object", "data")
    too_large = params_too_large(data)
    if too_large:
        raise InvalidInput(f"data: {too_large}", "data")
    check_key_shape(idempotency_key, MAX_EVENT_KEY)
    sent_key = idempotency_key
    now = clock()
    tasks = db.session.execute(select(Task).where(Task.tenant_id == tenant.id, Task.event == event_type,
                                                  Task.deleted_at.is_(None)).order_by(Task.id)).scalars().all()
    for task in tasks:  # each within the limit, and together over it: the run would carry both
        if too_large := params_too_large({**(task.params or {}), **data}):
            raise InvalidInput(f"data merged into task {task.name}'s params: {too_large}", "data")
    keys = {task.id: f"event:{task.id}:{sent_key or now.isoformat()}" for task in tasks}
    fired = _runs_of(tenant.id, list(keys.values())) if sent_key else {}
    answered = receipts.answered(tenant.id, [task.id for task in tasks], sent_key) if sent_key else {}
    outcomes, firings, in_flight = [], [], []
    for task in tasks:
        key = keys[task.id]
        if key in fired:  # sent before: its run, whatever it became
            outcomes.append(planner.Outcome(task.id, fired[key], "duplicate", "idempotency_key sent before"))
        elif task.id in answered:  # sent before and not fired then: resumed or past its debounce since, it still not
            outcomes.append(planner.Outcome(task.id, None, "duplicate",
                                            f"idempotency_key sent before, when the task was {answered[task.id]}"))
        elif task.paused:  # named in the answer, so a sender learns why a task it expected did not fire
            outcomes.append(planner.Outcome(task.id, None, "paused"))
        elif (holder := planner.debounced_by(task, key)) is not None:
            if sent_key and holder == key:  # the same event, sent again before its first send's answer (helper 157)
                in_flight.append(planner.Outcome(task.id, None, "duplicate", "idempotency_key sent at the same moment"))
                outcomes.append(in_flight[-1])
            else:
                outcomes.append(planner.Outcome(task.id, None, "debounced", f"within debounce_s {task.debounce_s}"))
        else:
            firings.append(planner.Firing(task.id, now, source="event", params=data, key=key))
    if sent_key:
        receipts.keep(tenant.id, sent_key, [(o.task_id, o.status) for o in outcomes if o.status in receipts.KEPT], now)
    made = planner.fire(firings, actor, clock)
    db.session.commit()  # the receipts, when nothing fired to commit them
    outcomes += made
    raced = in_flight + [outcome for outcome in made if outcome.status == "duplicate" and outcome.run_id is None]
    if sent_key and raced:  # the same event sent at the same moment: the other request's runs
        won = _runs_of(tenant.id, [keys[outcome.task_id] for outcome in raced])
        for outcome in raced:
            outcome.run_id = won.get(keys[outcome.task_id])
            if outcome.run_id is not None:
                outcome.reason = "idempotency_key sent before"
    return sorted(outcomes, key=lambda outcome: outcome.task_id)


def _runs_of(tenant_id: int, keys: list[str]) -> dict[str, int]:
    """Return the runs these idempotency keys name in the tenant: key → run id."""
    if not keys:
        return {}
    return dict(db.session.execute(select(Run.idempotency_key, Run.id).where(
        Run.tenant_id == tenant_id, Run.idempotency_key.in_(keys))).all())


def post_event(task: Task, data, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> list:
    """Post a task's event for a person: every enabled task of its tenant listening for it fires; audited."""
    outcomes = on_event(task.tenant, task.event, data, actor, clock)
    audit.record(db.session, actor, "event.post", "task", task.id, tenant=task.tenant.name, clock=clock,
                 after={"type": task.event, "data": data,
                        "runs": [{"task_id": o.task_id, "run_id": o.run_id, "status": o.status} for o in outcomes]})
    db.session.commit()
    return outcomes


def run_now(task: Task, actor: Actor, clock: Clock = SYSTEM_CLOCK, *, outside_window: bool = False
            ) -> planner.Outcome:
    """Fire a task once, now, whatever its schedule (a paused task too: a person asked); its execution window holds
    the run until it opens unless the person asks to run outside it."""
    if not isinstance(outside_window, bool):
        raise InvalidInput("outside_window is true or false", "outside_window")
    now = clock()
    released = _start_waiting_run(task, actor, now) if outside_window else None
    if released is not None:
        return released
    [outcome] = planner.fire([planner.Firing(task.id, now, source="manual", outside_window=outside_window)], actor,
                             clock)
    audit.record(db.session, actor, "task.trigger", "task", task.id,
                 after={"run_id": outcome.run_id, **({"outside_window": True} if outside_window else {})},
                 tenant=task.tenant.name, clock=clock)
    db.session.commit()
    return outcome


# Why a run made now waits or did not start, for the person who asked (the console's flash, the CLI's line).
REASONS = {
    "window": "outside its execution window; it starts when the window opens",
    "quota": "the tenant's queue is full; it starts when there is room",
    "mutex_forbid": "another run with the same mutex key is active and the concurrency policy is forbid",
}
RELEASED = "started now, outside its execution window, at a person's ask"


WINDOW_CHANGED = "started now: its task's execution window, changed, no longer holds it"
WINDOW_MOVED = "execution window: its task's window changed; it starts when the window opens at {:%Y-%m-%d %H:%M} UTC"


@dataclass
class WindowFollowed:
    """What a window edit did to the task's runs waiting for its window: started now, or moved to the new opening."""

    released: list[Run] = field(default_factory=list)
    moved: list[Run] = field(default_factory=list)
    opening: datetime | None = None

    def audited(self) -> dict:
        return {**({"released_runs": [run.id for run in self.released]} if self.released else {}),
                **({"moved_runs": [run.id for run in self.moved], "to_opening": self.opening.isoformat()}
                   if self.moved else {})}


def follow_new_window(task: Task, actor: Actor, now) -> WindowFollowed:
    """Start now the task's runs waiting for an execution window that its edit removed or that is open now, or move
    them to the new window's next opening, in the caller's transaction (which holds the task's row); queue them with
    `queue_followed` after the commit.

    They waited for the opening of the window they were made under: removed, one waited six days and, under a
    forbid mutex, cancelled every firing meanwhile; changed to another closed one, they kept the old opening
    (helper 151)."""
    if task.window and not (window := Window.from_mapping(task.window)).contains(now):
        return _move_to_opening(task, window.next_opening(now), actor, now)
    released = []
    while (run := transitions.release_from_window(task.id, now, actor=actor.name, message=WINDOW_CHANGED)):
        released.append(run)
    return WindowFollowed(released=released)


def _move_to_opening(task: Task, opening: datetime, actor: Actor, now) -> WindowFollowed:
    """Move the task's runs waiting for another opening to this one (due then, their deferral's job named by it)."""
    why = WINDOW_MOVED.format(opening)
    # Guarded: a worker taking one at its old opening meanwhile leaves it to that worker.
    moved_ids = db.session.execute(
        update(Run).where(Run.task_id == task.id, Run.status == "pending", Run.status_reason == "window",
                          or_(Run.due_at.is_(None), Run.due_at != opening))
        .values(due_at=opening, next_retry_at=opening, wait_reason=why, updated_at=now)
        .returning(Run.id).execution_options(synchronize_session=False)).scalars().all()
    moved = [db.session.get(Run, run_id, populate_existing=True) for run_id in sorted(moved_ids)]
    for run in moved:
        transitions.event(run, "deferred", now, reason="window_changed", message=why, actor=actor.name)
    # The run the cron firings of a closed window join takes the new opening's key, or the firings after the edit
    # would make a second run beside it. Refused (a firing planned with the old window made that key meanwhile), it
    # keeps its own.
    joined = [run for run in moved if run.idempotency_key.startswith(opening_keys(task.id))]
    if joined:
        with contextlib.suppress(IntegrityError), db.session.begin_nested():
            db.session.execute(update(Run).where(Run.id == joined[0].id)
                               .values(idempotency_key=opening_key(task.id, opening))
                               .execution_options(synchronize_session=False))
    return WindowFollowed(moved=moved, opening=opening)


def queue_followed(task: Task, followed: WindowFollowed) -> None:
    """Queue the runs a window edit released or moved, once committed; the reconciler queues any Redis lost."""
    if not followed.released and not followed.moved:
        return
    _, policy = policies.effective(task.policy_id, task.policy_overrides)
    try:
        for run in followed.released:
            queueing.enqueue_now(run.id, run.series, run.attempt, policy.timeout_s)
        for run in followed.moved:
            queueing.enqueue_at(followed.opening, run.id, run.series, run.attempt, policy.timeout_s, deferral=True)
    except Exception as error:  # noqa: BLE001 - committed: the reconciler queues a pending run Redis lost
        log.warning("runs %s moved by a window edit but not queued (%s); the reconciler will queue them",
                    [run.id for run in followed.released + followed.moved], error)


def _start_waiting_run(task: Task, actor: Actor, now) -> planner.Outcome | None:
    """Start now the task's oldest run waiting for its execution window, if one waits; audited, committed.

    What "run now, outside the window" means then: a new run would find the task's mutex held by the waiting one
    (a forbid task's was cancelled at once), and the waiting one would still start again at the opening."""
    run = transitions.release_from_window(task.id, now, actor=actor.name, message=RELEASED)
    if run is None:
        return None
    audit.record(db.session, actor, "task.trigger", "task", task.id,
                 after={"run_id": run.id, "outside_window": True, "released": True}, tenant=task.tenant.name,
                 clock=lambda: now)
    db.session.commit()
    _, policy = policies.effective(task.policy_id, task.policy_overrides)
    try:
        queueing.enqueue_now(run.id, run.series, run.attempt, policy.timeout_s)
    except Exception as error:  # noqa: BLE001 - committed: the reconciler queues a pending run Redis lost
        log.warning("run %s released from its window but not queued (%s); the reconciler will queue it", run.id,
                    error)
    return planner.Outcome(task.id, run.id, "released")
