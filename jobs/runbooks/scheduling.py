"""Runbooks for schedules: backfill a task's missed cron firings over a past range."""

from console.domain.runbooks import Param, Risk
from console.domain.runbooks import ParamType as T
from console.services.recovery.runbook_registry import Runbook
from console.services.scheduling import backfill as backfilling

CHUNK = 200


def _check(values: dict, now) -> dict:
    if values["end"] <= values["start"]:
        return {"end": "must be after start"}
    if values["end"] > now:
        return {"end": f"must not be in the future (it is {now:%Y-%m-%d %H:%M} UTC now); the scheduler fires those"}
    too_many = backfilling.over_the_limit(values["task"], values["start"], values["end"])
    return {"end": too_many} if too_many else {}


def backfill_task(ctx) -> None:
    """Create one run per cron firing of the task from start to end that has none; a second backfill creates none."""
    params = ctx.params
    plan = backfilling.plan(params["task"], params["start"], params["end"], ctx.now, ctx.tenant_id)
    task = plan.task
    ctx.log(f"Task {task.name} ('{task.cron}', {task.timezone}): {len(plan.firings)} firings from "
            f"{params['start']:%Y-%m-%d %H:%M} to {params['end']:%Y-%m-%d %H:%M} UTC; "
            f"{len(plan.firings) - len(plan.missing)} have a run, {len(plan.missing)} have none.")
    if ctx.dry_run:
        for moment in plan.missing:
            ctx.change("run", f"task:{task.id}:{moment.isoformat()}", "status", None, "pending")
        ctx.log(f"Would create {len(plan.missing)} run(s), each under the key task:{task.id}:<firing>.")
        return
    created = duplicates = 0
    for offset in range(0, len(plan.missing), CHUNK):
        chunk = plan.missing[offset:offset + CHUNK]
        outcomes = backfilling.fire(plan, chunk, ctx.actor, ctx.clock)
        for moment, outcome in zip(chunk, outcomes, strict=True):
            if outcome.run_id is not None:
                created += 1
                status = "pending" if outcome.status == "created" else "cancelled"
                ctx.change("run", outcome.run_id, "status", None,
                           f"{status} ({outcome.reason})" if outcome.reason else status)
            else:
                duplicates += 1
                ctx.log(f"Firing {moment:%Y-%m-%d %H:%M} UTC got a run meanwhile; left as it is.")
        ctx.commit()
        ctx.log(f"Created runs for {offset + len(chunk)} of {len(plan.missing)} firings.")
    ctx.log(f"{created} run(s) created" + (f", {duplicates} already there" if duplicates else "") + ".")


BACKFILL = Runbook(
    "backfill_task", "Backfill a task",
    "Create one run for each cron firing of a task in a past range that has none (a scheduler was down, the task "
    "was paused). Each run has its firing's idempotency key, so running it twice creates nothing new.", Risk.MEDIUM, (
        Param("task", T.TASK, required=True, help="The task's id."),
        Param("start", T.DATETIME, required=True, help="First firing to consider, UTC."),
        Param("end", T.DATETIME, required=True, help="Last firing to consider, UTC; not in the future."),
    ), backfill_task, check=_check)
