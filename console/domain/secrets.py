"""Secrets masked in text people read or logs keep: tokens, Authorization values, passwords and keys, URL paths."""

import re

MASK = "***"

_PATTERNS = [
    # An Authorization header or field, whatever its scheme.
    (re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)[^\"'\r\n,;}]+"), rf"\1{MASK}"),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{MASK}"),
    # Rebound API tokens keep their public prefix (shown in Admin → API tokens), never the rest.
    (re.compile(r"\b(rb_[A-Za-z0-9_-]{7})[A-Za-z0-9_-]+"), rf"\1{MASK}"),
    # key=value, key: value and "key": "value" for keys that name a secret (routing_key is PagerDuty's).
    # retry_token is an idempotency token shown in the console, not a credential.
    (re.compile(r"(?i)\b(?!retry_token\b)([a-z0-9_]*(?:password|passwd|secret|token|api_?key|access_?key|routing_?key|"
                r"private_?key|signature)[a-z0-9_]*)([\"']?\s*[:=]\s*[\"']?)[^\s\"'&,;}]+"), rf"\1\2{MASK}"),
]
# Absolute URLs keep scheme and host: webhook URLs (Slack, Teams, ...) carry their secret in the path,
# others in the query or user info. The console's own access log has relative paths, which stay.
_URL = re.compile(r"\b(https?://)(?:[^\s/@'\"<>]+@)?([^\s/?#'\"<>]+)([/?#][^\s'\"<>]*)?", re.IGNORECASE)


def _mask_url(match: re.Match) -> str:
    rest = match.group(3) or ""
    return f"{match.group(1)}{match.group(2)}{'/' + MASK if rest.strip('/') else rest}"


def redact(text: str, secrets: list[str] = ()) -> str:
    """Mask tokens, Authorization values, URL paths and queries, passwords and keys in a piece of text."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return _URL.sub(_mask_url, text)
