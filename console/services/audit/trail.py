"""Append to and verify the keyed, hash-chained audit log."""

import hmac
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, insert, select, update

from console.db.prepared import Prepared
from console.db.upsert import insert_for
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.secrets import mask_pair
from console.models import AuditEntry, AuditHead
from console.services.actor import Actor
from console.services.audit import anchors
from console.services.audit.chain import GENESIS, Linker, audit_key, json_text, keyed_mac, legacy_digest


@dataclass(frozen=True)
class Change:
    """What one audited change did to one target."""

    target_id: object = ""
    before: object = None
    after: object = None
    tenant: str | None = None

    def __post_init__(self):
        # The chain keeps a row for good: a secret in it (a params fix's api_key) could never be taken out again.
        before, after = mask_pair(self.before, self.after)
        object.__setattr__(self, "before", before)
        object.__setattr__(self, "after", after)


def record(session, actor: Actor, action: str, target_type: str, target_id="", *, before=None,
           after=None, tenant: str | None = None, note: str | None = None, clock: Clock = SYSTEM_CLOCK) -> dict:
    """Add an audit row to the caller's transaction, chained to the previous row."""
    return record_many(session, actor, action, target_type, [Change(target_id, before, after, tenant)], note=note,
                       clock=clock)[0]


def _take_head(session, count: int) -> AuditHead:
    bump = update(AuditHead).where(AuditHead.id == 1).values(seq=AuditHead.seq + count)
    if session.execute(bump.execution_options(synchronize_session=False)).rowcount == 0:
        # The very first append: two at once on PostgreSQL both find no head; one inserts it, the other waits.
        upsert = insert_for(session.connection())
        session.execute(upsert(AuditHead).values(id=1, seq=0, hash=GENESIS, keyed_from=1)
                        .on_conflict_do_nothing(index_elements=["id"]))
        session.execute(bump.execution_options(synchronize_session=False))
    return session.execute(select(AuditHead).where(AuditHead.id == 1)
                           .execution_options(populate_existing=True)).scalar_one()


def record_many(session, actor: Actor, action: str, target_type: str, changes: list[Change], *,
                note: str | None = None, clock: Clock = SYSTEM_CLOCK) -> list[dict]:
    """Add one chained audit row per change to the caller's transaction, taking the chain's head once."""
    if not changes:
        return []
    # Bumping the head first takes the write lock, so concurrent appends queue up instead of forking.
    head = _take_head(session, len(changes))
    # The requester is the actor; the approver, and what acted for them (a runbook), are kept beside them on every row.
    said = (f"approved by {actor.approved_by}" if actor.approved_by else None,
            f"via {actor.via}" if actor.via else None)
    note = " · ".join(part for part in (note, *said) if part) or None
    shared = {"at": clock(), "actor": actor.name, "actor_id": actor.id, "action": action, "target_type": target_type,
              "remote_addr": actor.remote_addr, "note": note}
    first = changes[0]
    # Columns every change has alike are encoded once for the whole batch (a bulk replay's "before", its tenant).
    for name in ("before", "tenant"):
        if all(getattr(change, name) == getattr(first, name) for change in changes):
            shared[name] = getattr(first, name)
    linker = Linker(audit_key(), shared)
    stored_json = [(index, name) for index, name in enumerate(linker.varying) if name in _JSON]
    rows, prev_hash = [], head.hash
    for seq, change in enumerate(changes, start=head.seq - len(changes) + 1):
        row = {"seq": seq, "target_id": str(change.target_id), "tenant": change.tenant, "before": change.before,
               "after": change.after, "prev_hash": prev_hash}
        texts = linker.texts(row)
        for index, name in stored_json:  # the MAC's encoding of a JSON column is also the text stored
            row[name] = texts[index]
        row["hash"] = prev_hash = linker.mac_of(texts)
        rows.append(row)
    head.hash = prev_hash
    for name in _JSON & shared.keys():
        shared[name] = json_text(shared[name])
    # Core with its conversions worked out once, not the unit of work: the ORM's bookkeeping per object, then
    # SQLAlchemy's per-row parameter handling, each cost more than a row's MAC and INSERT.
    _INSERT.execute_many(session.connection(), shared, rows, encoded=_JSON)
    return rows


_INSERT = Prepared(insert(AuditEntry.__table__), tuple(column.key for column in AuditEntry.__table__.c))
_JSON = frozenset({"before", "after"})


LISTED_PROBLEMS = 20  # a re-chained log breaks every row after the edit: the first ones say where, a count the rest


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    checked: int
    first_bad_seq: int | None = None
    problem: str = ""
    legacy: int = 0  # of the rows checked, those chained with the unkeyed SHA-256 of before the switch
    anchors: int = 0
    anchor_file: str = ""
    # Every other problem the walk found past the first, as (row, what), the first LISTED_PROBLEMS of them.
    also: tuple[tuple[int | None, str], ...] = ()
    unlisted: int = 0  # problems found beyond those listed


class _Broken(Exception):
    def __init__(self, seq: int | None, problem: str):
        super().__init__(problem)
        self.seq, self.problem = seq, problem


def _rows_were(first: int, last: int) -> str:
    return f"row {first} was" if first == last else f"rows {first}–{last} were"


def verify(session, *, publish: bool = True, clock: Clock = SYSTEM_CLOCK, batch: int = 5000) -> ChainReport:
    """Recompute every row's link, check the head and every published anchor; anchor the head if all holds."""
    # A fresh transaction, so the head read below is no older than the anchors read from the file (SQLite keeps
    # a read transaction's first snapshot; an older one would take a newer anchor for truncation).
    session.rollback()
    where = anchors.path()
    walk = _Walk(session, batch)
    try:
        published = anchors.read_all(where)
        walk.run(published, where)
    except anchors.BadAnchorFile as error:
        return ChainReport(False, walk.checked, None, str(error), anchor_file=str(where))
    except _Broken as broken:
        walk.note(broken)
    if walk.problems:
        # The walk goes on past a bad row, so an auditor learns every row that was touched, not only the first.
        (seq, problem), *also = walk.problems
        return ChainReport(False, walk.checked, seq, problem, anchor_file=str(where), also=tuple(also),
                           unlisted=walk.unlisted)
    legacy = min(walk.keyed_from - 1, walk.checked)
    if publish:
        head = anchors.Anchor(0, clock().isoformat(timespec="seconds"), walk.seq, walk.mac, walk.keyed_from)
        last = published[-1] if published else None
        if last is None or (last.seq, last.mac, last.keyed_from) != (head.seq, head.mac, head.keyed_from):
            anchors.publish(head, where)
    return ChainReport(True, walk.checked, legacy=legacy, anchors=len(published), anchor_file=str(where))


class _Walk:
    """One pass over the chain up to the head committed when it starts."""

    def __init__(self, session, batch: int):
        self.session, self.batch = session, batch
        self.checked, self.seq, self.mac, self.keyed_from = 0, 0, GENESIS, 1
        self.problems: list[tuple[int | None, str]] = []
        self.unlisted = 0

    def note(self, broken: _Broken) -> None:
        """Keep a problem and walk on."""
        if len(self.problems) <= LISTED_PROBLEMS:
            self.problems.append((broken.seq, broken.problem))
        else:
            self.unlisted += 1

    def run(self, published: list[anchors.Anchor], where) -> None:
        # The head is read first: rows appended while we walk lie beyond it and wait for the next verify.
        head = self.session.execute(select(AuditHead).where(AuditHead.id == 1)).scalar_one_or_none()
        if head is None:
            self._no_head()
            head = AuditHead(id=1, seq=0, hash=GENESIS, keyed_from=1)  # an empty log, which anchors may deny
        self.keyed_from = head.keyed_from
        for anchor in published:
            if anchor.keyed_from != head.keyed_from:
                raise _Broken(min(anchor.keyed_from, head.keyed_from),
                              f"the chain says rows are keyed from row {head.keyed_from}, but the anchor of "
                              f"{anchor.at} (line {anchor.line} of {where}) says from row {anchor.keyed_from}: "
                              "the switch-over from legacy rows was moved")
        by_seq = defaultdict(list)
        for anchor in published:
            by_seq[anchor.seq].append(anchor)
        self._rows(head.seq, by_seq, where)
        if self.seq != head.seq:
            raise _Broken(self.seq + 1, f"{_rows_were(self.seq + 1, head.seq)} removed: the chain's head says the "
                                        f"log ends at row {head.seq}, the last row is {self.seq}")
        if head.hash != self.mac:
            raise _Broken(head.seq, f"the chain's head does not carry row {head.seq}'s MAC")
        self._beyond(head.seq, published, where)

    def _no_head(self) -> None:
        rows = self.session.execute(select(func.max(AuditEntry.seq))).scalar()
        if rows:
            raise _Broken(1, f"the chain's head (table audit_head) is gone but the log has rows up to {rows}")

    def _rows(self, last: int, by_seq: dict, where) -> None:
        key, anchored_ok = audit_key(), 0
        while self.seq < last:
            rows = self.session.execute(
                select(AuditEntry).where(AuditEntry.seq > self.seq, AuditEntry.seq <= last)
                .order_by(AuditEntry.seq).limit(self.batch)
            ).scalars().all()
            if not rows:
                return
            for entry in rows:
                seq = self.seq + 1
                if entry.seq != seq:
                    # The row after a gap chains from a row that is gone: the gap is its problem, not its link.
                    gone = f"row {seq} is" if seq == entry.seq - 1 else f"rows {seq}–{entry.seq - 1} are"
                    self.note(_Broken(seq, f"{gone} missing: the log goes from row {self.seq} to row {entry.seq}"))
                elif entry.prev_hash != self.mac:
                    self.note(_Broken(seq, f"row {seq} does not chain from row {self.seq} (its prev_hash differs)"))
                try:
                    self._check_link(key, entry)
                except _Broken as broken:
                    self.note(broken)
                for anchor in by_seq.get(entry.seq, ()):
                    if anchor.mac != entry.hash:
                        since = f" after row {anchored_ok}" if anchored_ok else ""
                        self.note(_Broken(entry.seq, f"row {entry.seq} is not the row anchored at {anchor.at} (line "
                                                     f"{anchor.line} of {where}): the chain was rewritten{since}"))
                    else:
                        anchored_ok = entry.seq
                # Walk on from the row as stored: a row changed in place leaves its successors' links intact.
                self.seq, self.mac, self.checked = entry.seq, entry.hash, self.checked + 1
                self.session.expunge(entry)

    def _check_link(self, key: bytes, entry: AuditEntry) -> None:
        if entry.seq < self.keyed_from:
            if legacy_digest(self.mac, entry) != entry.hash:
                raise _Broken(entry.seq, f"row {entry.seq} (a legacy row) does not match its SHA-256: it was changed")
        elif not hmac.compare_digest(keyed_mac(key, entry), entry.hash):
            raise _Broken(entry.seq, f"row {entry.seq} does not match its MAC: it was changed or re-chained without "
                                     "the audit key (or this process has another key: REBOUND_AUDIT_KEY, else the "
                                     "secret key)")

    def _beyond(self, last: int, published: list[anchors.Anchor], where) -> None:
        later = max(published, key=lambda anchor: anchor.seq, default=None)
        if later is not None and later.seq > last:
            raise _Broken(last + 1, f"{_rows_were(last + 1, later.seq)} removed: the anchor of {later.at} (line "
                                    f"{later.line} of {where}) recorded the log at row {later.seq}, it now ends "
                                    f"at row {last}")
        stray = self.session.execute(select(func.min(AuditEntry.seq)).where(AuditEntry.seq > last)).scalar()
        if stray is not None:
            # A row committed after we read the head is fine; one the head does not cover is not.
            now = self.session.execute(select(AuditHead.seq).where(AuditHead.id == 1)).scalar()
            if now is None or stray > now:
                raise _Broken(stray, f"row {stray} lies beyond the chain's head (row {last}): the head was moved "
                                     "back")
