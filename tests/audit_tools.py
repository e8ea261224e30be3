"""What someone with the database but not the audit key can do to the audit log: raw SQL and plain SHA-256."""

import hashlib
import hmac
import json

from sqlalchemy import select, text

from console.extensions import db
from console.models import AuditEntry
from console.services.actor import Actor
from console.services.audit import trail as audit

GENESIS = "0" * 64


def write_rows(n: int, actor: Actor | None = None) -> None:
    """Append n audited changes, one transaction each."""
    for i in range(n):
        audit.record(db.session, actor or Actor("ops"), "thing.change", "thing", i, before={"v": i},
                     after={"v": i + 1})
        db.session.commit()


def last_seq() -> int:
    return db.session.execute(text("SELECT MAX(seq) FROM audit_log")).scalar()


def plain_sha256(prev_hash: str, entry) -> str:
    """Return the unkeyed digest the log used before it was keyed (written out here as an attacker would)."""
    body = {"seq": entry.seq, "at": entry.at.isoformat(), "actor": entry.actor, "action": entry.action,
            "target": [entry.target_type, entry.target_id], "tenant": entry.tenant, "before": entry.before,
            "after": entry.after, "note": entry.note}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


def hmac_with(key: bytes):
    """Return a link that signs every column as the console does, but with a key of the attacker's choosing."""
    from console.services.audit.chain import DOMAIN, body

    return lambda prev_hash, entry: hmac.new(key, (DOMAIN + body(entry)).encode(), hashlib.sha256).hexdigest()


def rechain(from_seq: int, link, *, keyed_from: int | None = None) -> None:
    """Recompute prev_hash and hash of every row from `from_seq` on with `link`, move the head to match (raw SQL)."""
    entries = db.session.execute(select(AuditEntry).order_by(AuditEntry.seq)).scalars().all()
    db.session.expunge_all()  # worked on as plain objects; the ORM would refuse to write them back
    prev = next((e.hash for e in reversed(entries) if e.seq < from_seq), GENESIS)
    for entry in (e for e in entries if e.seq >= from_seq):
        entry.prev_hash = prev
        prev = link(prev, entry)
        db.session.execute(text("UPDATE audit_log SET prev_hash = :p, hash = :h WHERE seq = :s"),
                           {"p": entry.prev_hash, "h": prev, "s": entry.seq})
    db.session.execute(text("UPDATE audit_head SET seq = :s, hash = :h WHERE id = 1"),
                       {"s": entries[-1].seq, "h": prev})
    if keyed_from is not None:
        db.session.execute(text("UPDATE audit_head SET keyed_from = :k WHERE id = 1"), {"k": keyed_from})
    db.session.commit()


def cut_after(seq: int) -> None:
    """Delete every row after `seq` and move the head back onto row `seq`, so the chain ends cleanly there."""
    mac = db.session.execute(text("SELECT hash FROM audit_log WHERE seq = :s"), {"s": seq}).scalar()
    db.session.execute(text("DELETE FROM audit_log WHERE seq > :s"), {"s": seq})
    db.session.execute(text("UPDATE audit_head SET seq = :s, hash = :h WHERE id = 1"), {"s": seq, "h": mac})
    db.session.commit()


def verify_cli(app):
    """Run `rebound audit verify` as a person would; return the click result."""
    return app.test_cli_runner().invoke(args=["audit", "verify"])
