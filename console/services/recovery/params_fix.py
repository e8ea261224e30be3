"""Fix a dead letter's params, then replay it: a data fix that waits for a second person's approval."""

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from console.db import locks
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Approval, DeadLetter, Run, RunbookExecution
from console.services.actor import SYSTEM, Actor
from console.services.engine import replays, transitions, waiting_fixes
from console.services.errors import Conflict, InvalidInput, NotFound
from console.services.inputs import params_too_large
from console.services.recovery import approvals, runbook_reconcile, runbooks
from console.services.recovery.kinds import Applied, FixKind, Restored

NAME = waiting_fixes.KIND
FIX_RUNBOOK = "fix_params_and_replay"  # the runbook that fixes a letter's params too (jobs/runbooks/dead_letters.py)


def _letter(letter_id, tenant_id: int | None) -> DeadLetter:
    letter = db.session.get(DeadLetter, letter_id) if isinstance(letter_id, int) else None
    if letter is None or (tenant_id is not None and letter.tenant_id != tenant_id):
        raise NotFound(f"no dead letter with id {letter_id}")
    return letter


def _checked(params) -> dict:
    if not isinstance(params, dict):
        raise InvalidInput("params must be a JSON object", "params")
    if too_large := params_too_large(params):
        raise InvalidInput(too_large, "params")
    return params


def request_fix(letter_id: int, params, reason, actor: Actor, *, tenant_id: int | None = None, merge=False,
                clock: Clock = SYSTEM_CLOCK) -> Approval:
    """Ask for a dead letter's run to be replayed with new params (all of them, or with merge the keys to change
    over the run's); a second person approves it."""
    letter = _letter(letter_id, tenant_id)
    if not isinstance(merge, bool):
        raise InvalidInput("merge is true or false", "merge")
    params = _checked(params)
    if letter.status != "open":
        raise Conflict(f"dead letter {letter.id} is already {letter.status}", "status")
    run = letter.run
    if merge:
        params = _checked({**(run.params or {}), **params})  # what the approver reads is the whole result
    if params == run.params:
        raise InvalidInput("these are the params the run already has; change at least one", "params")
    locks.hold(fix_lock(letter.id))  # against the runbook's path filing one at the same moment (any_fix_waiting)
    by_runbook = runbook_fix_waiting(letter.id, clock())
    if by_runbook is not None:
        raise Conflict(f"request #{by_runbook} to fix dead letter {letter.id} (runbook {FIX_RUNBOOK}) is already "
                       "waiting for approval; only one fix of a letter waits at a time: ask an approver to decide it",
                       "dead_letter")
    filing = {"reason": reason, "subject_type": "dead_letter", "subject_id": letter.id,
              "payload": {"dead_letter_id": letter.id, "run_id": run.id, "params": params},
              "before": {"params": run.params}, "after": {"params": params}, "tenant": letter.tenant, "clock": clock}
    for _ in range(2):
        try:
            approval = approvals.request(NAME, actor, **filing)
            db.session.commit()
            return approval
        except IntegrityError:
            # The unique index decides (two people filing at once): only one fix of a letter can wait, since the
            # first to run changes the params the others were written against.
            db.session.rollback()
            pending = waiting(letter_id)
            if pending is not None and pending.expires_at > clock():
                raise Conflict(f"request #{pending.id} to fix dead letter {letter_id} is already waiting for "
                               "approval; ask an approver to decide it", "dead_letter") from None
            approvals.expire_due(clock)  # the waiting one ran out of time and only lacks its mark: file again
    raise Conflict(f"dead letter {letter_id} has a fix waiting for approval", "dead_letter")


def waiting(letter_id: int) -> Approval | None:
    """Return the fix of this dead letter that waits for approval, if one does (there is at most one)."""
    return db.session.execute(select(Approval).where(
        Approval.kind == NAME, Approval.subject_id == str(letter_id), Approval.status == "pending")
    ).scalar_one_or_none()


def _runbook_fixes_waiting(now: datetime) -> list[tuple[int, int, object]]:
    """Return the requests to run fix_params_and_replay that wait for approval: (request id, execution id, the
    dead letter its params name), oldest first."""
    # Its dead letter is inside the stored params (JSON), and few such requests wait: read them all. The request's
    # own state decides (an expired one's execution is cancelled only at the reconciler's next pass).
    return [(approval_id, execution_id, (params or {}).get("dead_letter")) for approval_id, execution_id, params in
            db.session.execute(select(RunbookExecution.approval_id, RunbookExecution.id, RunbookExecution.params)
                               .join(Approval, Approval.id == RunbookExecution.approval_id).where(
                RunbookExecution.runbook == FIX_RUNBOOK, RunbookExecution.status == "awaiting_approval",
                Approval.status == "pending", Approval.expires_at > now).order_by(RunbookExecution.approval_id))]


def runbook_fixes_on(letter_ids: list[int], now: datetime) -> dict[int, int]:
    """Return the request to run fix_params_and_replay that waits for approval on each of these dead letters that
    has one: letter id → request id."""
    if not letter_ids:
        return {}
    wanted, found = {str(letter_id): letter_id for letter_id in letter_ids}, {}
    for approval_id, _, letter in _runbook_fixes_waiting(now):
        letter_id = wanted.get(str(letter))
        if letter_id is not None:
            found.setdefault(letter_id, approval_id)
    return found


def runbook_fix_waiting(letter_id: int, now: datetime) -> int | None:
    """Return the request to run fix_params_and_replay on this dead letter that waits for approval, if one does."""
    return runbook_fixes_on([letter_id], now).get(letter_id)


def fix_lock(letter_id: int) -> str:
    """Name the lock both ways of filing a fix of this letter hold from their check to their commit."""
    return f"params_fix:{letter_id}"


def any_fix_waiting(letter_id: int, now: datetime) -> int | None:
    """Return the request waiting for approval to fix this dead letter, by the DLQ's form or by the runbook.

    Holds the letter's fix lock until the caller's transaction ends, in which the caller files its own request.
    """
    locks.hold(fix_lock(letter_id))
    pending = waiting(letter_id)
    if pending is not None and pending.expires_at > now:
        return pending.id
    return runbook_fix_waiting(letter_id, now)


def waiting_on(letter_ids: list[int], now: datetime) -> dict[int, int]:
    """Return the fix waiting for approval of each of these dead letters that has one: letter id → request id."""
    if not letter_ids:
        return {}
    found = db.session.execute(select(Approval.subject_id, Approval.id).where(
        Approval.kind == NAME, Approval.status == "pending", Approval.expires_at > now,
        Approval.subject_type == "dead_letter", Approval.subject_id.in_([str(letter_id) for letter_id in letter_ids])))
    return {int(subject_id): approval_id for subject_id, approval_id in found}


def fixed_letter(approval: Approval) -> int | None:
    """Return the dead letter a fix request acts on, asked from the DLQ or with the fix_params_and_replay runbook
    (None for any other request)."""
    if approval.kind == NAME:
        return approval.payload["dead_letter_id"]
    if approval.kind != runbooks.KIND:
        return None
    execution = db.session.get(RunbookExecution, (approval.payload or {}).get("execution_id"))
    letter_id = (execution.params or {}).get("dead_letter") if execution and execution.runbook == FIX_RUNBOOK else None
    return letter_id if isinstance(letter_id, int) else None


def settled(approval: Approval) -> tuple[int, str] | None:
    """Say which dead letter a fix acts on and how it stopped being open ("replayed by bob at …"), or None while it
    is open (and for any other request)."""
    letter_id = fixed_letter(approval)
    said = waiting_fixes.settled(letter_id) if letter_id is not None else None
    return (letter_id, said) if said is not None else None


def letters(approval: Approval) -> list[DeadLetter]:
    """Return the dead letter a fix acts on, as it stands now: the failure the approver judges the fix by."""
    letter = db.session.get(DeadLetter, approval.payload["dead_letter_id"])
    return [letter] if letter is not None else []


def supersede_settled(clock: Clock = SYSTEM_CLOCK) -> list[int]:
    """The "params-fixes-supersede" maintenance job: close the fixes waiting for approval whose dead letter was
    settled meanwhile by a path that did not close them itself (approving them could only fail); return their ids."""
    now = clock()
    closed = waiting_fixes.close(waiting_fixes.waiting(), SYSTEM, now)
    db.session.commit()
    # The runbook's fixes: no replay closes them in its own transaction (they wait on a runbook execution).
    for approval_id, execution_id, letter_id in _runbook_fixes_waiting(now):
        said = waiting_fixes.settled(letter_id) if isinstance(letter_id, int) else None
        if said is None:
            continue
        outcome = waiting_fixes.nothing_left(letter_id, said)
        if approvals.supersede(approval_id, outcome, now):
            runbook_reconcile.cancel_refused(execution_id, approval_id, "superseded", outcome, now)
            closed.append(approval_id)
        db.session.commit()
    return closed


def restart_with(run_id: int, letter_id: int, before: dict, after: dict, actor: Actor, now: datetime, *,
                 message: str) -> list:
    """Give a dead letter's run new params and restart it, in the caller's transaction; `replays.enqueue` the rows
    after its commit. Raises Conflict if the params or the letter moved on since they were read."""
    # Held until the commit, so a concurrent edit of the same run waits and then sees the new params.
    run = db.session.execute(select(Run).where(Run.id == run_id).with_for_update()
                             .execution_options(populate_existing=True)).scalar_one()
    if run.params != before:
        raise Conflict(f"run {run_id}'s params changed since the request; file a new one", "params")
    db.session.execute(update(Run).where(Run.id == run_id).values(params=after)
                       .execution_options(synchronize_session=False))
    transitions.event(run, "params_fixed", now, actor=actor.signature, message=message,
                      data={"before": before, "after": after})
    restarted = replays.restart([letter_id], actor, now=now).rows
    if not restarted:
        raise Conflict(f"dead letter {letter_id} is no longer open, or its run is no longer dead", "status")
    return restarted


def _apply(approval: Approval, actor: Actor, now: datetime) -> Applied:
    run_id, letter_id = approval.payload["run_id"], approval.payload["dead_letter_id"]
    restarted = restart_with(run_id, letter_id, approval.before["params"], approval.after["params"], actor, now,
                             message=f"approval #{approval.id}")
    # The run as the fix left it: a rollback is refused once the run has moved on from here (it ran again).
    left = db.session.execute(select(Run.series, Run.status, Run.attempt).where(Run.id == run_id)).one()
    return Applied(backup={"run_id": run_id, "params": approval.before["params"], "series": left.series,
                           "status": left.status, "attempt": left.attempt},
                   after_commit=lambda: replays.enqueue(restarted),
                   outcome=f"run #{run_id} replayed with the new params (series {left.series})")


def _moved_on(run: Run, backup: dict) -> bool:
    """Say whether the run has started an attempt since the fix (a backup from before this check: not pending).

    Its status alone may move without one: a breaker holding the replay puts it in retry_wait at attempt 0.
    """
    if "series" not in backup:
        return run.status != "pending" or run.attempt != 0
    return (run.series, run.attempt) != (backup["series"], backup["attempt"])


def _kept(run: Run, approval: Approval) -> Conflict | None:
    """Say why the run's params stay as the fix left them (None: a rollback may restore them)."""
    if run.params != approval.after["params"]:
        return Conflict(f"run {run.id}'s params changed since the fix", "params")
    if _moved_on(run, approval.backup):
        return Conflict(f"run {run.id} ran again since the fix (it is {run.status}, series {run.series}, attempt "
                        f"{run.attempt}): its params are what it ran with, so they stay", "status")
    return None


def _why_kept(approval: Approval) -> str | None:
    """Say why a rollback would be refused now, read without a lock (the rollback itself checks again, locked)."""
    kept = _kept(db.session.get(Run, approval.backup["run_id"]), approval)
    return kept.detail if kept else None


def _rollback(approval: Approval, actor: Actor, now: datetime) -> Restored | None:
    run_id = approval.backup["run_id"]
    run = db.session.execute(select(Run).where(Run.id == run_id).with_for_update()
                             .execution_options(populate_existing=True)).scalar_one()
    if kept := _kept(run, approval):
        raise Conflict(f"{kept.detail}; nothing was restored", kept.field)
    db.session.execute(update(Run).where(Run.id == run_id).values(params=approval.backup["params"])
                       .execution_options(synchronize_session=False))
    transitions.event(run, "params_restored", now, actor=actor.name, message=f"rollback of approval #{approval.id}",
                      data={"before": approval.after["params"], "after": approval.backup["params"]})
    if run.status in ("pending", "retry_wait"):
        # Its replay has not started (a breaker may hold it): it still goes, with the params restored.
        return Restored(before=approval.after, after=approval.before,
                        left=f"run #{run.id}'s replay has not started and still goes ahead, now with the params as "
                             "they were; cancel the run to stop it")
    return None


KIND = FixKind(NAME, "Edit a dead letter's params, then replay it", _apply, _rollback, _why_kept)
