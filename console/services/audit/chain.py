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


# body()'s own encoding, built once: json.dumps with these arguments makes a new encoder on every call.
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode
# Values a flat JSON object may hold and still come back from the database exactly as handed in.
_SCALARS = frozenset({str, int, bool, type(None)})


def _scalar(value) -> str:
    """Return json.dumps(value) with body()'s arguments, for a column value (a moment is written in UTC)."""
    kind = type(value)
    if kind is str:
        return _encode(value)
    if kind is int:
        return str(value)  # json's own text for an int; its encoder costs ten times more
    if value is None:
        return "null"
    return _encode(_plain(value, False))


def json_text(value) -> str:
    """Return the encoding of what a JSON column gives back for `value` (itself valid JSON to store)."""
    # A flat object with string keys and plain values is its own round trip, so the dumps-and-loads is skipped.
    if type(value) is dict and all(type(key) is str and type(item) in _SCALARS for key, item in value.items()):
        return "{" + ",".join(_encode(key) + ":" + _scalar(value[key]) for key in sorted(value)) + "}"
    return _encode(_plain(value, True))


class Linker:
    """Chain many rows that share most columns: `body()`'s exact text, with the shared columns encoded once.

    A bulk replay appends thousands of rows that differ only in their position, target, tenant and after; encoding
    every column of every row (and a fresh HMAC key schedule each time) was most of an audit row's cost.
    """

    def __init__(self, key: bytes, shared: dict):
        self._start = hmac.new(key, DOMAIN.encode(), hashlib.sha256)
        json_columns = _json_columns()
        self.varying = tuple(name for name in sorted(covered_columns()) if name not in shared)
        self._encoders = tuple(json_text if name in json_columns else _scalar for name in self.varying)
        # The text between two varying values: every shared column that sorts between them, already encoded.
        pieces, text = [], "{"
        for name in sorted(covered_columns()):
            text += ("" if text == "{" else ",") + _encode(name) + ":"
            if name in shared:
                text += _encode(_plain(shared[name], name in json_columns))
            else:
                pieces.append(text)
                text = ""
        self._pieces, self._tail = pieces, text + "}"

    def texts(self, values: dict) -> list[str]:
        """Return each varying column's encoding, in `varying` order (a JSON column's is also what to store)."""
        return [encode(values[name]) for name, encode in zip(self.varying, self._encoders, strict=True)]

    def body(self, values: dict) -> str:
        """Return body() of the row made of the shared columns and these (every name in `varying`)."""
        return self._join(self.texts(values))

    def mac(self, values: dict) -> str:
        """Return keyed_mac() of that row."""
        return self.mac_of(self.texts(values))

    def mac_of(self, texts: list[str]) -> str:
        """Return keyed_mac() of the row whose varying columns encode to `texts`."""
        link = self._start.copy()
        link.update(self._join(texts).encode())
        return link.hexdigest()

    def _join(self, texts: list[str]) -> str:
        parts = []
        for piece, text in zip(self._pieces, texts, strict=True):
            parts.append(piece)
            parts.append(text)
        parts.append(self._tail)
        return "".join(parts)


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
