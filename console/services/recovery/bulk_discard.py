"""Discard dead letters in bulk: up to an admin-set number an hour per person; more becomes a request a second person
approves."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import exists, func, select, true
from sqlalchemy.orm import joinedload

from console.db import locks
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.words import plural
from console.extensions import db
from console.models import Approval, AuditEntry, DeadLetter, Tenant, User
from console.services.actor import Actor
from console.services.dlq import discards
from console.services.dlq import groups as dlq
from console.services.engine import waiting_fixes
from console.services.errors import Conflict
from console.services.recovery import approvals
from console.services.recovery.kinds import Applied, FixKind, Restored
from console.services.system import console_settings

NAME = "dlq.discard_bulk"
# The limit counts what one person discarded this long back too: ten discards of 10 are 100 letters, not ten times 10.
WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class Outcome:
    """What a bulk discard did: discarded at once (and how many were skipped), or filed for approval."""

    discarded: int = 0
    skipped: int = 0
    approval: Approval | None = None
    threshold: int = 0
    discarded_lately: int = 0  # what the person had discarded within the window when this was filed
    closed_fixes: list[int] = field(default_factory=list)  # params fixes that waited on the letters discarded


def threshold() -> int:
    """Return how many dead letters one bulk discard may close without approval."""
    return console_settings.value(console_settings.DISCARD_WITHOUT_APPROVAL)


def discarded_lately(actor: Actor, now: datetime) -> int:
    """Count the dead letters this person discarded in the last hour on their own word (not those an approval let
    them discard): their audit rows, read by the index on time."""
    if actor.id is None:
        return 0
    # An approved discard's rows name the approver in a field of their outcome (discards._after); the note's
    # "approved by" follows a reason the person typed, which "approved by myself" imitated (helper 149).
    return db.session.execute(select(func.count()).select_from(AuditEntry).where(
        AuditEntry.at >= now - WINDOW, AuditEntry.action == "dead_letter.discard", AuditEntry.actor_id == actor.id,
        AuditEntry.after["approved_by"].as_string().is_(None))).scalar_one()


def allowance(actor: Actor, now: datetime) -> int:
    """Return how many more dead letters this person may discard now without approval."""
    return max(threshold() - discarded_lately(actor, now), 0)


def _listed(ids: list[int]) -> str:
    """Name the letters as the subject column holds them (80 characters): their ids, cut short with '…'."""
    listed = ",".join(map(str, ids))
    return listed if len(listed) <= 80 else listed[:listed.rindex(",", 0, 78)] + ",…"


def letters(approval: Approval) -> list[DeadLetter]:
    """Return the dead letters a bulk-discard request names, oldest first, with their runs: what the approver reads."""
    ids = (approval.payload or {}).get("ids") or []
    return list(db.session.execute(select(DeadLetter).options(joinedload(DeadLetter.run)).where(
        DeadLetter.id.in_(ids), DeadLetter.tenant_id == approval.tenant_id if approval.tenant_id else true())
        .order_by(DeadLetter.id)).scalars())


def waiting_on(letter_ids: list[int], now: datetime) -> dict[int, int]:
    """Return the bulk discard waiting for approval that names each of these dead letters: letter id → request id."""
    return {letter_id: approval_id for letter_id, (approval_id, _) in waiting_with_tenant(letter_ids, now).items()}


def waiting_with_tenant(letter_ids: list[int], now: datetime) -> dict[int, tuple[int, int | None]]:
    """As waiting_on, with each request's tenant (None: across tenants, which only unscoped people see)."""
    if not letter_ids:
        return {}
    wanted, found = set(letter_ids), {}
    # The ids are inside each request's payload (JSON), and few requests wait at once: read them all, oldest first.
    waiting = select(Approval.id, Approval.payload, Approval.tenant_id).where(
        Approval.kind == NAME, Approval.status == "pending", Approval.expires_at > now).order_by(Approval.id)
    for approval_id, payload, tenant_id in db.session.execute(waiting):
        for letter_id in wanted.intersection((payload or {}).get("ids") or ()):
            found.setdefault(letter_id, (approval_id, tenant_id))
    return found


def _counted(actor: Actor, now: datetime) -> int:
    """Hold the person's discard lock to the commit, then count their discards of the last hour: two discards of
    theirs at once cannot both spend the same allowance (four at once took 16 of 10)."""
    if actor.id is not None:
        locks.hold(f"discard:person:{actor.id}", now)
    return discarded_lately(actor, now)


def discard(ids: list[int], reason, actor: Actor, tenant_id: int | None, clock: Clock = SYSTEM_CLOCK) -> Outcome:
    """Discard the selected open dead letters now, or, above the threshold, file the discard for approval."""
    ids = discards.selection(ids)  # first: asked for a reason with nothing ticked, a person looks for the wrong fix
    reason = discards.reason_of(reason)
    limit, lately = threshold(), _counted(actor, clock())
    letters = [letter for letter in dlq.visible(ids, tenant_id) if letter.status == "open"]
    if not letters or len(letters) + lately <= limit:  # none open: nothing to ask anyone about
        discarded, skipped, closed = discards.discard_many(ids, reason, actor, tenant_id, clock)
        return Outcome(discarded, skipped, threshold=limit, closed_fixes=closed)
    return _file(letters, len(ids), reason, actor, limit, lately, clock)


def discard_one(letter: DeadLetter, reason, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> Outcome:
    """Discard one dead letter now, or file it for approval when the person has no discard left this hour (one at a
    time, a person could otherwise discard any number)."""
    reason = discards.reason_of(reason, "this dead letter is")
    limit, lately = threshold(), _counted(actor, clock())
    if letter.status != "open" or lately < limit:
        return Outcome(1, 0, threshold=limit, closed_fixes=discards.discard(letter, reason, actor, clock))
    return _file([letter], 1, reason, actor, limit, lately, clock)


def _asked_by(requests: list[int], actor: Actor) -> str:
    """Name waiting requests with who asked, and who may act on them: "approve or withdraw that one" was said to
    operators, who may do neither to another's request (helper 98); one across tenants only an approver who sees
    every tenant can open (a tenant's approver was sent to a request they could not find; helper 140)."""
    askers = {approval_id: (user_id, username, tenant_id) for approval_id, user_id, username, tenant_id
              in db.session.execute(select(Approval.id, User.id, User.username, Approval.tenant_id)
                                    .join(User, User.id == Approval.requested_by_id).where(Approval.id.in_(requests)))}
    named = ", ".join(f"#{request} (asked by {'you' if askers[request][0] == actor.id else askers[request][1]}"
                      f"{', across tenants' if askers[request][2] is None else ''})" for request in requests)
    if any(askers[request][2] is None for request in requests):
        return named + ": an approver who sees every tenant decides it"
    mine = all(askers[request][0] == actor.id for request in requests)
    return named + (": an approver decides it, or you withdraw it to ask again" if mine
                    else ": a person with the approve permission decides it")


def _file(letters: list[DeadLetter], asked: int, reason: str, actor: Actor, limit: int, lately: int,
          clock: Clock) -> Outcome:
    """File the discard of these open letters for a second person's approval, leaving out those another request
    waits on already (approving the second could only fail)."""
    # One filing at a time, to the commit: two people filing the same letters at once both read none waiting and both
    # filed. Filings are rare (a person past their hour), so one lock for all costs nothing.
    locks.hold("discard:requests", clock())
    waiting = waiting_on([letter.id for letter in letters], clock())
    if len(waiting) == len(letters):
        requests = sorted(set(waiting.values()))
        asked_by = _asked_by(requests, actor)
        db.session.rollback()  # lets go of the filings' lock
        raise Conflict(f"{'it waits' if len(letters) == 1 else 'they wait'} already in discard "
                       f"{'request' if len(requests) == 1 else 'requests'} {asked_by}", "id")
    letters = [letter for letter in letters if letter.id not in waiting]
    tenant_ids = {letter.tenant_id for letter in letters}
    # A request about one tenant's letters is that tenant's; one across tenants only unscoped approvers see.
    tenant = db.session.get(Tenant, tenant_ids.pop()) if len(tenant_ids) == 1 else None
    chosen = [letter.id for letter in letters]
    approval = approvals.request(
        NAME, actor, reason=reason, subject_type="dead_letters", subject_id=_listed(chosen),
        payload={"ids": chosen, "reason": reason},
        before={"dead_letters": {str(i): "open" for i in chosen}},
        after={"dead_letters": {str(i): "discarded" for i in chosen}}, tenant=tenant, clock=clock)
    db.session.commit()
    return Outcome(0, asked - len(chosen), approval, limit, lately)


def over_the_limit(count: int, outcome: Outcome) -> str:
    """Say how a filed discard went over the limit: "Discarding 12 dead letters is", or counting the hour's too."""
    asked = f"Discarding {plural(count, 'dead letter')}"
    if not outcome.discarded_lately:
        return f"{asked} is"
    return (f"You discarded {plural(outcome.discarded_lately, 'dead letter')} in the last hour; "
            f"{asked[0].lower()}{asked[1:]} more makes {outcome.discarded_lately + count:,},")


def supersede_settled(clock: Clock = SYSTEM_CLOCK) -> list[int]:
    """The "bulk-discards-supersede" maintenance job: close the bulk discards waiting for approval none of whose dead
    letters is open any more (replayed, discarded or resolved since: approving could only fail); return their ids."""
    now, closed = clock(), []
    for approval in db.session.execute(select(Approval).where(Approval.kind == NAME, Approval.status == "pending",
                                                              Approval.expires_at > now)).scalars().all():
        ids = (approval.payload or {}).get("ids") or []
        outcome = (f"none of its {len(ids)} dead letters is open any more (replayed, discarded or resolved since), "
                   "before anyone decided: there is nothing left to discard")
        # A letter opened again (a rollback) since wins, as an approver deciding at the same moment does.
        still_open = exists().where(DeadLetter.id.in_(ids), DeadLetter.status == "open")
        if approvals.supersede(approval.id, outcome, now, ~still_open):
            closed.append(approval.id)
        db.session.commit()
    return closed


def _apply(approval: Approval, actor: Actor, now: datetime) -> Applied:
    ids = approval.payload["ids"]
    # The actor is the requester with "approved by …, request #N" beside them, on each letter and audit row.
    discarded = discards.discard_open(ids, approval.payload["reason"], actor, now, tenant_id=approval.tenant_id).ids
    if not discarded:
        raise Conflict("none of the dead letters is still open: they were replayed or discarded meanwhile", "status")
    skipped = sorted(set(ids) - set(discarded))
    outcome = f"discarded {plural(len(discarded), 'dead letter')}" + (
        f"; {len(skipped):,} {'was' if len(skipped) == 1 else 'were'} no longer open" if skipped else "")
    return Applied(backup={"ids": discarded, "skipped": skipped, "discarded_at": now.isoformat()}, outcome=outcome,
                   change={"dead_letters": {str(i): "discarded" for i in discarded}})


def _rollback(approval: Approval, actor: Actor, now: datetime) -> Restored:
    backup = approval.backup
    discarded_at = datetime.fromisoformat(backup["discarded_at"])
    reopened = discards.reopen(backup["ids"], discarded_at, actor, now, approval_id=approval.id)
    if not reopened:
        raise Conflict("nothing was reopened: each of these dead letters was settled another way since the discard, or "
                       "its run was retried (a letter whose run moved on stays as it is)", "status")
    kept = sorted(set(backup["ids"]) - set(reopened))
    left = None if not kept else (
        f"{plural(len(reopened), 'dead letter')} reopened; {', '.join(f'#{i}' for i in kept)} "
        f"{'stays' if len(kept) == 1 else 'stay'} as now: settled another way since the discard, or "
        f"{'its run was' if len(kept) == 1 else 'their runs were'} retried")
    # The params fixes the discard closed wait for approval again, as they did before it.
    fixes, closed = waiting_fixes.restore(reopened, discarded_at, actor, now,
                                          note=f"rollback of approval #{approval.id}")
    if closed:  # "the rows are as they were" would not be true of them (helper 167)
        left = "; ".join(part for part in (left, (
            f"params {'fix' if len(closed) == 1 else 'fixes'} {', '.join(f'#{i}' for i in closed)} "
            f"{'stays' if len(closed) == 1 else 'stay'} closed: past {'its' if len(closed) == 1 else 'their'} time "
            "to be decided, or another fix of the letter waits; file a new one if it is still needed")) if part)
    before, after = {"dead_letters": {str(i): "discarded" for i in reopened}}, {
        "dead_letters": {str(i): "open" for i in reopened}}
    if fixes:
        before["params_fixes"], after["params_fixes"] = ({str(i): status for i in fixes}
                                                         for status in ("superseded", "pending"))
    return Restored(before=before, after=after, left=left)


KIND = FixKind(NAME, "Discard dead letters past the hourly allowance", _apply, _rollback)

