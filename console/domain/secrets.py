"""Secrets masked in text people read or logs keep: tokens, Authorization values, passwords and keys, URL paths."""

import json
import re
from contextlib import contextmanager, suppress
from contextvars import ContextVar

MASK = "***"
CHANGED = "*** (changed)"  # the after side of a secret-named field whose value a change replaces
# The values of the secret-named fields a run or a runbook execution was given, masked by value in whatever text is
# redacted while it runs (its error's message, traceback, log lines, a runbook's log): the patterns caught
# "api_key=sk_…" but not "upstream refused key sk_…", which every viewer then read (helper 120).
_HELD: ContextVar[tuple[str, ...]] = ContextVar("held_secrets", default=())
MIN_HELD = 4  # shorter values ("1", "yes") would mask ordinary words

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
# A field whose name says it holds a secret (a params fix's api_key, a runbook's token, a header's Authorization);
# retry_token is not one.
SECRET_FIELD = re.compile(r"(?i)(?!retry_token$)[a-z0-9_-]*(?:password|passwd|secret|token|api[_-]?key|"
                          r"access[_-]?key|routing[_-]?key|private[_-]?key|signature|authorization|credential)"
                          r"[a-z0-9_-]*")
# What a field may say about a secret without holding it: kept as it is.
_STATES = frozenset({"", "set", "unreadable", "plaintext", "sealed", MASK, CHANGED})
# Absolute URLs keep scheme and host: webhook URLs (Slack, Teams, ...) carry their secret in the path,
# others in the query or user info. The console's own access log has relative paths, which stay.
_URL = re.compile(r"\b(https?://)(?:[^\s/@'\"<>]+@)?([^\s/?#'\"<>]+)([/?#][^\s'\"<>]*)?", re.IGNORECASE)


def _mask_url(match: re.Match) -> str:
    rest = match.group(3) or ""
    return f"{match.group(1)}{match.group(2)}{'/' + MASK if rest.strip('/') else rest}"


def held_in(params) -> tuple[str, ...]:
    """Return the text held in secret-named fields at any depth of params (all of a secret-named object), longest
    first."""
    found, todo = set(), [(params, False)]
    while todo:
        node, secret = todo.pop()
        if isinstance(node, dict):
            todo.extend((item, secret or (isinstance(key, str) and bool(SECRET_FIELD.fullmatch(key))))
                        for key, item in node.items())
        elif isinstance(node, list):
            todo.extend((item, secret) for item in node)
        elif isinstance(node, str):
            if secret and len(node) >= MIN_HELD and _held(node):
                found.add(node)
            if node.lstrip()[:1] in ("{", "["):  # JSON typed into a text box: its own secret-named fields
                with suppress(ValueError, RecursionError):
                    todo.append((json.loads(node), secret))
    return tuple(sorted(found, key=len, reverse=True))


@contextmanager
def holding(values: tuple[str, ...]):
    """Mask these values too in everything redacted within (this thread, and what it forks)."""
    token = _HELD.set(tuple(sorted({*values, *_HELD.get()}, key=len, reverse=True)))
    try:
        yield
    finally:
        _HELD.reset(token)


def mask_held(value):
    """Return JSON with its secret-named fields masked and the held values masked in its text (a handler's result,
    kept on the run and shown to every viewer)."""
    return _without_held(mask_fields(value), _HELD.get())


def _without_held(value, held: tuple[str, ...]):
    if isinstance(value, dict):
        masked: dict = {}
        for key, item in value.items():
            # Keys too: a result keyed by account or credential gave the secret to every viewer (helper 134).
            shown = _without_held(key, held) if isinstance(key, str) else key
            base, number = shown, 2
            while shown in masked:  # two keys masked alike both stay, the second numbered
                shown, number = f"{base} #{number}", number + 1
            masked[shown] = _without_held(item, held)
        return masked
    if isinstance(value, list):
        return [_without_held(item, held) for item in value]
    if isinstance(value, str):
        for secret in held:
            value = value.replace(secret, MASK)
    return value


def redact(text: str, secrets: list[str] = ()) -> str:
    """Mask tokens, Authorization values, URL paths and queries, passwords and keys in a piece of text."""
    for secret in (*secrets, *_HELD.get()):
        text = text.replace(secret, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return _URL.sub(_mask_url, text)


def mask_fields(value):
    """Return JSON with the value of every field named like a secret masked, at any depth (for rows kept for good),
    JSON written as text included (a runbook's params parameter is a JSON object typed into a text box), and those
    values masked wherever else the JSON repeats them (a "message" quoting its api_key read whole; helper 121)."""
    return _without_held(_mask_named(value), held_in(value))


def _mask_named(value):
    if isinstance(value, dict):
        return {key: MASK if isinstance(key, str) and SECRET_FIELD.fullmatch(key) and _held(item)
                else _mask_named(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_mask_named(item) for item in value]
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        return _mask_json_text(value)
    return value


def mask_pair(before, after, name: str | None = None) -> tuple:
    """Return a change's before and after masked as mask_fields masks them (as field `name`'s values, if given), a
    secret-named field that changed reading CHANGED on the after side: masked alike, "***" → "***" read as
    unchanged, and an approver saw "1 field" while the request also changed an api_key (helper 149)."""
    if name is not None:
        shown = mask_pair({name: before}, {name: after})
        return shown[0][name], shown[1][name]
    return mask_fields(before), _mark_changed(before, after, mask_fields(after))


def _mark_changed(before, after, shown):
    """Put CHANGED where a secret-named field of `after` differs from `before` (shown: after, masked)."""
    if not (isinstance(before, dict) and isinstance(after, dict) and isinstance(shown, dict)):
        return shown
    for key, value in after.items():
        if key not in before or key not in shown:
            continue  # added (no before to differ from), or its key masked away
        if isinstance(key, str) and SECRET_FIELD.fullmatch(key) and shown[key] == MASK and before[key] != value:
            shown[key] = CHANGED
        else:
            shown[key] = _mark_changed(before[key], value, shown[key])
    return shown


def _mask_json_text(text: str) -> str:
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return text  # not JSON: text, which is kept as written
    masked = mask_fields(parsed)
    return text if masked == parsed else json.dumps(masked, ensure_ascii=False)


def _held(value) -> bool:
    """Tell whether a secret-named field's value could be (part of) a secret, not a word about one."""
    # "…ABCD", a long secret's last 4 characters as the console shows them, is a mask already.
    return value is not None and not isinstance(value, bool) and not (
        isinstance(value, str) and (value in _STATES or value.startswith("…")))
