"""The audit chain's link: an HMAC over every column of a row, keyed outside the database."""

import functools
import hashlib
import hmac
import json
from datetime import UTC, datetime

from sqlalchemy import JSON, inspect

from console.models import AuditEntry
from console.services.settings import setting

GENESIS = "0" * 64
# The row's own MAC is the one column it cannot cover.
UNCOVERED = frozenset({"hash"})
# A fixed label, so the chain's key is never the session-signing key itself (and a new purpose gets a new label).
KEY_LABEL = b"rebound audit chain key v1"
DOMAIN = "rebound-audit-v2\n"


@functools.cache
def covered_columns() -> tuple[str, ...]:
    """Return the names of the columns a keyed MAC covers: every column of the model but the MAC."""
    return tuple(attr.key for attr in inspect(AuditEntry).column_attrs if attr.key not in UNCOVERED)


@functools.cache
def _json_columns() -> frozenset[str]:
    return frozenset(attr.key for attr in inspect(AuditEntry).column_attrs
                     if isinstance(attr.columns[0].type, JSON))


def audit_key() -> bytes:
    """Return the chain's key: derived from REBOUND_AUDIT_KEY if set, else from the app's secret key."""
    secret = setting("AUDIT_KEY") or setting("SECRET_KEY")
    return hmac.new(str(secret).encode(), KEY_LABEL, hashlib.sha256).digest()


def _plain(value, as_json: bool):
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if as_json:
        # What the database hands back: tuples become lists and dict keys strings, so the MAC made at insert
        # and the one recomputed from the stored row agree (sort_keys cannot order 9 and "10" otherwise).
        return json.loads(json.dumps(value))
    return value


def body(entry: AuditEntry) -> str:
    """Return the canonical text of every covered column of one row."""
    json_columns = _json_columns()
    fields = {name: _plain(getattr(entry, name), name in json_columns) for name in covered_columns()}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def keyed_mac(key: bytes, entry: AuditEntry) -> str:
    """Return the row's HMAC-SHA256 (its prev_hash is one of the columns, which chains it)."""
    return hmac.new(key, (DOMAIN + body(entry)).encode(), hashlib.sha256).hexdigest()


def legacy_digest(prev_hash: str, entry: AuditEntry) -> str:
    """Return the unkeyed SHA-256 rows had before the chain was keyed (verified, never written any more)."""
    legacy = {
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
    canonical = json.dumps(legacy, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()
