"""Append to and verify the hash-chained audit log."""

import hashlib
import json
from dataclasses import dataclass

from sqlalchemy import select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.models import AuditEntry, AuditHead
from console.services.actor import Actor

GENESIS = "0" * 64


def _digest(prev_hash: str, entry: AuditEntry) -> str:
    body = {
        "seq": entry.seq,
        "at": entry.at.isoformat(),
        "actor": entry.actor,
        "action": entry.action,
        "target": [entry.target_type, entry.target_id],
        "tenant": entry.tenant,
        "before": entry.before,
        "after": entry.after,
        "note": entry.note,
    }
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


@dataclass(frozen=True)
class Change:
    """What one audited change did to one target."""

    target_id: object = ""
    before: object = None
    after: object = None
    tenant: str | None = None


def record(session, actor: Actor, action: str, target_type: str, target_id="", *, before=None,
           after=None, tenant: str | None = None, note: str | None = None, clock: Clock = SYSTEM_CLOCK):
    """Add an audit row to the caller's transaction, chained to the previous row."""
    return record_many(session, actor, action, target_type, [Change(target_id, before, after, tenant)], note=note,
                       clock=clock)[0]


def record_many(session, actor: Actor, action: str, target_type: str, changes: list[Change], *,
                note: str | None = None, clock: Clock = SYSTEM_CLOCK) -> list[AuditEntry]:
    """Add one chained audit row per change to the caller's transaction, taking the chain's head once."""
    # Bumping the head first takes the write lock, so concurrent appends queue up instead of forking.
    session.execute(update(AuditHead).where(AuditHead.id == 1).values(seq=AuditHead.seq + len(changes)))
    head = session.execute(select(AuditHead).where(AuditHead.id == 1)).scalar_one_or_none()
    if head is None:
        head = AuditHead(id=1, seq=len(changes), hash=GENESIS)
        session.add(head)
        session.flush()
    at, entries, prev_hash = clock(), [], head.hash
    for seq, change in enumerate(changes, start=head.seq - len(changes) + 1):
        entry = AuditEntry(
            seq=seq, at=at, actor=actor.name, actor_id=actor.id, action=action, target_type=target_type,
            target_id=str(change.target_id), tenant=change.tenant, before=change.before, after=change.after,
            remote_addr=actor.remote_addr, prev_hash=prev_hash, note=note,
        )
        entry.hash = prev_hash = _digest(prev_hash, entry)
        entries.append(entry)
    head.hash = prev_hash
    session.add_all(entries)
    return entries


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    checked: int
    first_bad_seq: int | None = None
    problem: str = ""


def verify(session, batch: int = 5000) -> ChainReport:
    """Recompute every row's hash in order; report the first row that does not match."""
    prev, checked, last_seq = GENESIS, 0, 0
    while True:
        rows = session.execute(
            select(AuditEntry).where(AuditEntry.seq > last_seq).order_by(AuditEntry.seq).limit(batch)
        ).scalars().all()
        if not rows:
            break
        for entry in rows:
            if entry.seq != last_seq + 1:
                return ChainReport(False, checked, last_seq + 1, f"row {last_seq + 1} is missing")
            if entry.prev_hash != prev or _digest(prev, entry) != entry.hash:
                return ChainReport(False, checked, entry.seq, f"row {entry.seq} does not match its hash")
            prev, last_seq, checked = entry.hash, entry.seq, checked + 1
            session.expunge(entry)
    head = session.get(AuditHead, 1)
    if head is not None and (head.seq != last_seq or head.hash != prev):
        return ChainReport(False, checked, last_seq + 1, "rows after the last one were removed")
    return ChainReport(True, checked)
