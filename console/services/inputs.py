"""Checks of raw input values that several services and views share."""

import json
import math
import sys
import unicodedata
from datetime import UTC, datetime

from console.domain import keys, names
from console.domain.ids import MAX_ID
from console.domain.notes import MAX_NOTE_CHARS, too_long
from console.services.errors import InvalidInput

# A run's params are stored with it and sent to its handler on every attempt: kept to a sensible size.
MAX_PARAMS_BYTES = 64 * 1024
# JSON nested deeper than this is refused before anything walks it (json.dumps, our own code) and overflows.
MAX_JSON_DEPTH = 64


def is_digits(text: str) -> bool:
    """Tell whether text is ASCII digits only, few enough for int() to read.

    str.isdigit() and int() take other scripts' digits too ("٣" is 3); and int() refuses a string of more digits than
    sys.get_int_max_str_digits() (4,300) with a ValueError, which a query argument of 5,000 nines made a 500.
    """
    return text.isascii() and text.isdigit() and _few_enough(text)


def typed_whole(text: str) -> int | str:
    """Return the whole number a person typed (a sign allowed), or the text itself for the service to say what it
    takes."""
    return int(text) if is_digits(text[1:] if text[:1] in ("+", "-") else text) else text


def _few_enough(digits: str) -> bool:
    limit = sys.get_int_max_str_digits()
    return limit == 0 or len(digits) <= limit


# Characters that show nothing: separators (spaces), controls and formats (zero-width space, bidi marks).
_UNSEEN = ("Z", "Cc", "Cf")


def blank(text: str) -> bool:
    """Tell whether text shows nothing: only spaces and invisible characters (U+200B, bidi marks, controls)."""
    return all(unicodedata.category(char).startswith(_UNSEEN) for char in text)


def key_refusal(key: str, field: str = "idempotency_key") -> InvalidInput | None:
    """Return the 422 for a key holding a character a person cannot see or type back (keys.hidden), or None."""
    said = keys.hidden(key, field)
    return InvalidInput(said, field) if said else None


def is_id(value) -> bool:
    """Tell whether a JSON value is a row id (a whole number that fits a database id; `true` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_ID <= value <= MAX_ID


def row_id(text: str) -> int:
    """Parse a row id from a query string or form field; ValueError when it cannot name a row."""
    value = int(text)
    if not 1 <= value <= MAX_ID:
        raise ValueError(f"{text!r} is not a row id")
    return value


def name(value, what: str, field: str = "name") -> str:
    """Return a name a tenant, policy, template or quota class can have, or raise a 422 that says the rule."""
    if value is None:  # "got NoneType" read as a fault of the server's (helper 104)
        raise InvalidInput(f"{field} is required: {what} names are {names.RULE}", field)
    if not names.is_name(value):
        shown = repr(value[:80]) + ("…" if len(value) > 80 else "") if isinstance(value, str) else type(value).__name__
        raise InvalidInput(f"{what} names are {names.RULE}; got {shown}", field)
    return value


def aware_time(value, field: str, what: str) -> datetime | None:
    """Return the time with its offset a JSON value gives (None: not given), or raise a 422 naming `what` it is."""
    if value is None:
        return None
    moment = None
    if isinstance(value, str) and len(value) <= 40:
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            moment.astimezone(UTC)  # 9999-12-31T23:59-01:00 is past the last year UTC can write
        except (ValueError, OverflowError):
            moment = None
    if moment is None or moment.tzinfo is None:
        raise InvalidInput(f"{field} is {what}: an ISO 8601 time with its offset, as a GET returns it; leave it out "
                           "to save without the check", field)
    return moment


def params_too_large(params: dict) -> str | None:
    """Say why params cannot be stored (too large), or None."""
    # Their size as stored: the JSON columns write each non-ASCII character as a \uXXXX escape (6 bytes, 12 for one
    # outside the BMP), so 12,000 × 日 sent in 36 KB stores 72 KB. Said, or the figure reads as a miscount.
    stored = json.dumps(params, default=str)
    if len(stored) <= MAX_PARAMS_BYTES:
        return None
    escaped = len(json.dumps(params, default=str, ensure_ascii=False)) != len(stored)
    return (f"params are {len(stored):,} bytes as stored{ESCAPES if escaped else ''}; at most "
            f"{MAX_PARAMS_BYTES:,}")


ESCAPES = " (JSON, where each character outside ASCII is written as a 6-byte \\u escape)"


class RepeatedKey(Exception):
    """A JSON object with a key given twice."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key

    @property
    def problem(self) -> str:
        return f"the key {self.key[:80]!r} is given twice in one object: give it once"


def one_value_per_key(pairs: list) -> dict:
    """Build an object, refusing a key given twice: Python keeps the last silently, other readers the first."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set = set()
        raise RepeatedKey(next(key for key, _ in pairs if key in seen or seen.add(key)))
    return value


def json_text(text: str, label: str = "") -> object:
    """Decode JSON a person typed or uploaded; ValueError saying what to fix (its syntax, a key given twice, its depth
    or bad Unicode), as the API refuses its body."""
    named = f"{label} is " if label else ""
    try:
        value = json.loads(text, object_pairs_hook=one_value_per_key)
    except RepeatedKey as repeated:
        # The form kept the last silently, where the API refuses the same body (helpers 105, 106).
        raise ValueError(f"{label}: {repeated.problem}" if label else repeated.problem) from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{named}not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}") from None
    except RecursionError:  # the decoder's own stack, before json_problem could count the levels
        raise ValueError(f"{named}JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as error:
        problem = too_many_digits(error)
        raise ValueError(f"{label}: {problem}" if label else problem) from None
    problem = json_problem(value)
    if problem:
        raise ValueError(f"{label}: {problem}" if label else problem)
    return value


def too_many_digits(error: ValueError) -> str:
    """Say that valid JSON held an integer Python will not read (past sys.get_int_max_str_digits()); re-raise
    any other ValueError."""
    if "integer string conversion" not in str(error):
        raise error
    return f"a number in the JSON has more than {sys.get_int_max_str_digits():,} digits; send it as text, or a " \
           "smaller number"


def json_problem(value, root: str = "$") -> str | None:
    """Say what makes decoded JSON unusable (too deep, a lone surrogate, a number that is not finite), or None; the
    place is named from `root` (a batch item's field: "runs[3].params")."""
    stack = [(value, 1, root)]
    while stack:
        node, depth, path = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"JSON is nested deeper than {MAX_JSON_DEPTH} levels (at {path[:80]})"
        if isinstance(node, str):
            if not _encodable(node):
                return f"text at {path[:80]} is not valid Unicode (a lone surrogate such as \\ud800)"
            if "\x00" in node:
                return f"text at {path[:80]} contains a NUL character (\\u0000), which Rebound does not store"
        elif isinstance(node, float) and not math.isfinite(node):
            # Python's decoder takes NaN and Infinity (and reads 1e999 as infinity); JSON has neither, so once
            # stored they would make every API answer carrying them unreadable to a strict client.
            return f"the number at {path[:80]} is not finite (NaN, Infinity, or too large, like 1e999)"
        elif isinstance(node, dict):
            for key, item in node.items():
                if not _encodable(key):
                    return f"a key at {path[:80]} is not valid Unicode (a lone surrogate such as \\ud800)"
                if "\x00" in key:
                    return f"a key at {path[:80]} contains a NUL character (\\u0000), which Rebound does not store"
                stack.append((item, depth + 1, f"{path}.{key[:40]}"))
        elif isinstance(node, list):
            stack.extend((item, depth + 1, f"{path}[{index}]") for index, item in enumerate(node))
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def note(value, field: str, *, missing: str | None = None) -> str | None:
    """Return a reason or note a person wrote, stripped (None when empty); refuse one that is not text, is longer
    than the one limit, or is empty where `missing` says why it is needed."""
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"{field} must be text", field)
    text = (value or "").strip()
    if not text and missing:
        raise InvalidInput(missing, field)
    if len(text) > MAX_NOTE_CHARS:
        raise InvalidInput(too_long(field), field)
    return text or None
