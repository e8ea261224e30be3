"""Fire tasks on demand: events from other services, and 'run now'."""

from sqlalchemy import select

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Task, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import InvalidInput
from console.services.inputs import params_too_large
from console.services.scheduling import planner


def on_event(tenant: Tenant, event_type: str, data, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> list:
    """Fire every enabled task of the tenant registered for this event, with `data` merged into its params; a paused
    or debounced one is answered as such."""
    if not isinstance(data, dict):
        raise InvalidInput("data must be a JSON object", "data")
    too_large = params_too_large(data)
    if too_large:
        raise InvalidInput(f"data: {too_large}", "data")
    now = clock()
    tasks = db.session.execute(select(Task).where(Task.tenant_id == tenant.id, Task.event == event_type,
                                                  Task.deleted_at.is_(None)).order_by(Task.id)).scalars().all()
    outcomes, firings = [], []
    for task in tasks:
        key = f"event:{task.id}:{now.isoformat()}"
        if task.paused:  # named in the answer, so a sender learns why a task it expected did not fire
            outcomes.append(planner.Outcome(task.id, None, "paused"))
        elif planner.debounced(task, key):
            outcomes.append(planner.Outcome(task.id, None, "debounced", f"within debounce_s {task.debounce_s}"))
        else:
            firings.append(planner.Firing(task.id, now, source="event", params=data, key=key))
    return sorted(outcomes + planner.fire(firings, actor, clock), key=lambda outcome: outcome.task_id)


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
    [outcome] = planner.fire([planner.Firing(task.id, now, source="manual", outside_window=outside_window)], actor,
                             clock)
    audit.record(db.session, actor, "task.trigger", "task", task.id,
                 after={"run_id": outcome.run_id, **({"outside_window": True} if outside_window else {})},
                 tenant=task.tenant.name, clock=clock)
    db.session.commit()
    return outcome
