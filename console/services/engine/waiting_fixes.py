"""Params fixes waiting for approval on dead letters that were settled another way: closed as superseded.

A fix replays its letter with new params once a second person approves it; after a plain replay, a discard or a
resolve nothing is left to fix. Whatever settles a letter closes its waiting fix in the same transaction, so no
approver sees it waiting (the "params-fixes-supersede" job catches any that slip past). Here, below the engine,
because the engine's replays settle letters too; `recovery/params_fix.py` files and applies the fixes.
"""

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import exists, select, update
from sqlalchemy.orm import aliased

from console.db.id_lists import among
from console.extensions import db
from console.models import Approval, DeadLetter, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit

KIND = "dead_letter.fix_params"


def waiting() -> list[int]:
    """Return the ids of every fix waiting for approval (few: each expires after APPROVAL_TTL_S, a day by default)."""
    return db.session.execute(select(Approval.id).where(Approval.kind == KIND, Approval.status == "pending")
                              .order_by(Approval.id)).scalars().all()


def letters(now: datetime) -> list[int]:
    """Return the dead letters a fix waits on for approval now (few, as above), for the pages that warn of it."""
    return [int(subject) for subject in db.session.execute(select(Approval.subject_id).where(
        Approval.kind == KIND, Approval.status == "pending", Approval.expires_at > now,
        Approval.subject_type == "dead_letter")).scalars()]


def hold(letter_ids: Iterable[int]) -> list[int]:
    """Lock the fixes waiting on these letters (or their runs' other letters) before they change; return their ids.

    Approving a fix takes the request first, then the letter's run and the letter: taking the request first here
    too keeps the two from deadlocking on PostgreSQL. A decision under way is waited for, and its fix then no
    longer waits.
    """
    letter_ids = list(letter_ids)
    wanted = {str(letter_id) for letter_id in letter_ids}
    if not wanted:
        return []
    # All waiting fixes, two narrow columns (a bulk replay's chunk of 5,000 ids would be a list as long).
    pending = db.session.execute(select(Approval.id, Approval.subject_id).where(
        Approval.kind == KIND, Approval.status == "pending")).all()
    held = [approval_id for approval_id, subject in pending if subject in wanted]
    # A fix waiting on another open letter of the same run (left by a discard's rollback or an import): a replay
    # settles that letter too (replays._close_other_letters), so its fix is taken now, in the same order.
    others = {int(subject): approval_id for approval_id, subject in pending if subject not in wanted}
    if others:
        connection = db.session.connection()
        runs = select(DeadLetter.run_id).where(among(DeadLetter.id, letter_ids, connection.dialect.name))
        held += [others[letter_id] for letter_id in connection.execute(select(DeadLetter.id).where(
            DeadLetter.id.in_(list(others)), DeadLetter.run_id.in_(runs))).scalars()]
    return _lock(held)


def _lock(approval_ids: list[int]) -> list[int]:
    """Lock those of these requests still pending, in id order (nothing on SQLite: its write lock serialises)."""
    if not approval_ids:
        return []
    return db.session.execute(select(Approval.id).where(Approval.id.in_(approval_ids), Approval.status == "pending")
                              .order_by(Approval.id).with_for_update()).scalars().all()


def settled(letter_id: int) -> str | None:
    """Say how a dead letter stopped being open ("replayed by bob at …"), read afresh, or None while it is open."""
    letter = db.session.execute(select(DeadLetter.status, DeadLetter.resolved_by, DeadLetter.resolved_at)
                                .where(DeadLetter.id == letter_id)).one_or_none()
    if letter is None or letter.status == "open":
        return None
    when = f" at {letter.resolved_at:%Y-%m-%d %H:%M} UTC" if letter.resolved_at else ""
    return f"{letter.status} by {letter.resolved_by or 'someone'}{when}"


def close(approval_ids: list[int], actor: Actor, now: datetime) -> list[int]:
    """Close those of these fixes still waiting whose dead letter is settled, saying how, each audited as `actor`'s,
    in the caller's transaction; return their ids."""
    if not approval_ids:
        return []
    how = {approval_id: (subject, said) for approval_id, subject in db.session.execute(
        select(Approval.id, Approval.subject_id).where(Approval.id.in_(approval_ids)))
        if (said := settled(int(subject))) is not None}
    closed = []
    # All locked before the first audit row, which takes the audit chain's head: a decision holding one of them
    # while it waits for that head would otherwise deadlock with this.
    for approval_id in _lock(list(how)):
        letter_id, said = how[approval_id]
        outcome = nothing_left(letter_id, said)
        # Guarded like a decision's claim: an approver deciding at the same moment wins or loses as a whole.
        won = db.session.execute(update(Approval).where(Approval.id == approval_id, Approval.status == "pending")
                                 .values(status="superseded", decided_at=now, outcome=outcome)
                                 .returning(Approval.tenant_id).execution_options(synchronize_session=False)).first()
        if won is not None:
            closed.append(approval_id)
            # The request's tenant, as its request and decision rows carry: its tenant's people read it too.
            tenant = db.session.get(Tenant, won.tenant_id).name if won.tenant_id else None
            audit.record(db.session, actor, "approval.supersede", "approval", approval_id,
                         before={"status": "pending"}, after={"status": "superseded"}, note=outcome, tenant=tenant,
                         clock=lambda: now)
    return closed


def restore(letter_ids: list[int], settled_at: datetime, actor: Actor, now: datetime, *,
            note: str) -> tuple[list[int], list[int]]:
    """Put back to waiting the fixes closed when these dead letters were settled at `settled_at`, now that they are
    open again (a discard rolled back), each audited as `actor`'s with `note`, in the caller's transaction; return
    their ids, and those of the fixes that stay closed: past their expiry, or their letter has another fix waiting
    (each says its letter is open again, so its requester knows to file a new one)."""
    if not letter_ids:
        return [], []
    closed = db.session.execute(select(Approval.id, Approval.subject_id, Approval.expires_at, Approval.tenant_id)
                                .where(Approval.kind == KIND, Approval.status == "superseded",
                                       Approval.decided_at == settled_at,
                                       Approval.subject_id.in_([str(letter_id) for letter_id in letter_ids]))
                                .order_by(Approval.id)).all()
    other = aliased(Approval)
    none_waiting = ~exists().where(other.kind == KIND, other.status == "pending",
                                   other.subject_id == Approval.subject_id)
    restored, kept, names = [], [], {}
    for approval_id, letter_id, expires_at, tenant_id in closed:
        back = expires_at > now and db.session.execute(
            update(Approval).where(Approval.id == approval_id, Approval.status == "superseded", none_waiting)
            .values(status="pending", decided_at=None, outcome=None)
            .execution_options(synchronize_session=False)).rowcount
        if not back:
            # Still closed: its words said nothing was left to fix, and the letter is open again.
            db.session.execute(update(Approval).where(Approval.id == approval_id).values(
                outcome=Approval.outcome + f"; dead letter {letter_id} was opened again since ({note}): file a new "
                                           "fix if it still needs one").execution_options(synchronize_session=False))
            kept.append(approval_id)
            continue
        restored.append(approval_id)
        if tenant_id not in names:
            names[tenant_id] = db.session.get(Tenant, tenant_id).name if tenant_id else None
        audit.record(db.session, actor, "approval.restore", "approval", approval_id, before={"status": "superseded"},
                     after={"status": "pending"}, tenant=names[tenant_id],
                     note=f"{note}: dead letter {letter_id} is open again", clock=lambda: now)
    return restored, kept


def nothing_left(letter_id, said: str) -> str:
    """Say why a fix whose dead letter was settled first closes without anyone deciding, and what is left to do: a
    replayed run may die again into a newer letter; a discarded or resolved one will not (a discard's words sent the
    requester looking for a newer letter that cannot be; helper 144)."""
    then = ("file a new request against its newer dead letter if it dies again" if said.startswith("replayed")
            else "nothing of it is left to replay")
    return f"dead letter {letter_id} was {said}, before anyone decided: there is nothing left to fix; {then}"


def closed_words(approval_ids: list[int]) -> str:
    """Say which waiting fixes an action closed, for the person who acted ("" for none)."""
    if not approval_ids:
        return ""
    if len(approval_ids) == 1:
        return f"params fix #{approval_ids[0]} waiting for approval was closed"
    return f"params fixes {', '.join(f'#{i}' for i in approval_ids)} waiting for approval were closed"
