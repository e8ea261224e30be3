"""Runbooks for runs that wait: start their retries now, or cancel them, by filter (Sidekiq's Retry all and Delete
all; one run at a time was all the console offered: helper 153)."""

from sqlalchemy import select

from console.domain.runbooks import Param, Risk
from console.domain.runbooks import ParamType as T
from console.extensions import db
from console.models import Run
from console.models.runs import error_code_is
from console.services.engine import control, handler_kinds
from console.services.engine.submit import enqueue
from console.services.errors import Conflict
from console.services.policies import versions as policies
from console.services.recovery.runbook_registry import Runbook
from console.services.recovery.workflows import words as workflow_words

CHUNK = 200
STATUSES = {"retry_wait": ("retry_wait",), "pending": ("pending",), "both": control.WAITING}
NARROWING = (
    Param("task", T.TASK, help="Only this task's runs (its id)."),
    Param("handler", T.STR, max_length=120, help="Only this handler's runs, as stored: python:demo.flaky."),
    Param("without_task", T.BOOL, default=False,
          help="Only runs submitted without a task (as the Runs page's handler filter lists them)."),
    Param("code", T.STR, max_length=80, help="Only runs whose last failure had this error code."),
    Param("limit", T.INT, default=1000, minimum=1, maximum=100_000, help="At most this many, oldest first."),
)


def _check(values: dict, now) -> dict:
    if values["task"] and values["handler"]:
        return {"handler": "give a task or a handler, not both"}
    if values["task"] and values["without_task"]:
        return {"without_task": "a task's runs were submitted with it: give the task, or runs without one"}
    return {}


def _waiting(ctx, statuses: tuple[str, ...], after_id: int, size: int) -> list[Run]:
    """Return the next runs (by id, after `after_id`) in these statuses that the params and the tenant select."""
    params = ctx.params
    query = select(Run).where(Run.status.in_(statuses), Run.id > after_id).order_by(Run.id).limit(size)
    if ctx.tenant_id is not None:
        query = query.where(Run.tenant_id == ctx.tenant_id)
    if params["task"]:
        query = query.where(Run.task_id == params["task"])
    if params["handler"]:  # a bare name is a Python handler's, as on the Runs page and the DLQ (helper 157)
        # Parsed, not looked up: the runs of a handler removed since are still to be cancelled.
        query = query.where(Run.handler == "{}:{}".format(*handler_kinds.parse(params["handler"])))
    if params["without_task"]:
        query = query.where(Run.task_id.is_(None))
    if params["code"]:
        query = query.where(error_code_is(params["code"]))  # in any case, as the Runs page's filter
    return db.session.execute(query).scalars().all()


def _each(ctx, statuses: tuple[str, ...], act, after: str, said: str, then=None, consequence=None) -> None:
    """Act on every selected run, one transaction each, then call `then(run)` (a run that moved on meanwhile is left
    alone, said in the log); `consequence(run)` says what acting does to a workflow the run is a step of."""
    wanted, seen, after_id, done = ctx.params["limit"], 0, 0, 0
    while seen < wanted and (runs := _waiting(ctx, statuses, after_id, min(CHUNK, wanted - seen))):
        after_id, seen = runs[-1].id, seen + len(runs)
        for run in runs:
            was = {"status": run.status, "next_retry_at": run.next_retry_at}
            if consequence is not None and run.workflow_id is not None:
                # Before the act, as the dry-run an approver reads says it: a step's cancel stopped its workflow and
                # undid the steps before it, and no line said so (helper 160).
                ctx.log(consequence(run))
            if not ctx.dry_run:
                try:
                    act(run, ctx.actor, ctx.now)
                except Conflict:
                    now = db.session.get(Run, run.id, populate_existing=True)
                    ctx.log(f"Run #{run.id} left alone: it is {now.status if now else 'gone'} now.")
                    continue
                ctx.backup("run", run.id, was)
            ctx.change("run", run.id, "status", was["status"], after)
            ctx.commit()
            done += 1
            if then is not None and not ctx.dry_run:
                then(run)
        ctx.log(f"{done} of the {seen} looked at {'would be ' if ctx.dry_run else ''}{said}.")
    if not seen:
        ctx.log("No run matches.")


def retry_waiting_runs(ctx) -> None:
    """Start now the runs waiting for their next retry that match (their backoff cut short; no attempt is spent)."""
    timeouts: dict[tuple, int] = {}

    def queue(run: Run) -> None:  # once committed; the reconciler queues any Redis lost
        key = (run.policy_id, str(run.policy_overrides))
        if key not in timeouts:
            timeouts[key] = policies.effective(run.policy_id, run.policy_overrides)[1].timeout_s
        enqueue(run, timeouts[key])

    _each(ctx, STATUSES["retry_wait"], control.pull_forward, "pending", "started now", then=queue)


def cancel_waiting_runs(ctx) -> None:
    """Cancel the runs that match and are still waiting (pending, or waiting for a retry); running ones go on."""
    _each(ctx, STATUSES[ctx.params["status"]], control.cancel_waiting, "cancelled", "cancelled",
          consequence=workflow_words.workflow_cancel)


RETRY = Runbook(
    "retry_waiting_runs", "Retry waiting runs now",
    "Start now every run waiting for its next retry that matches, oldest first, as each run page's Retry now does: "
    "its backoff is cut short (no attempt is spent; an open circuit breaker still holds it).", Risk.LOW,
    NARROWING, retry_waiting_runs, check=_check, ahead=True)

CANCEL = Runbook(
    "cancel_waiting_runs", "Cancel waiting runs",
    "Cancel every run that matches and still waits (pending, or waiting for its next retry), oldest first, as each "
    "run page's Cancel does; a run that started meanwhile goes on. A workflow step's cancel stops its workflow, "
    "which undoes the steps before it: the log names each such workflow.", Risk.MEDIUM,
    (Param("status", T.CHOICE, default="retry_wait", choices=tuple(STATUSES),
           help="Which waiting runs: retry_wait (waiting for a retry), pending (queued), or both."), *NARROWING),
    cancel_waiting_runs, check=_check, ahead=True)
