"""Handler results made storable: JSON only, and bounded."""

import json

RESULT_LIMIT = 16_000


def json_safe(value):
    """Return the value if it is JSON of at most RESULT_LIMIT characters, else a bounded stand-in."""
    try:
        text = json.dumps(value, default=str, allow_nan=False)  # NaN is no JSON: PostgreSQL refuses it
    except (TypeError, ValueError):
        return {"repr": repr(value)[:RESULT_LIMIT]}
    return value if len(text) <= RESULT_LIMIT else {"truncated": text[:RESULT_LIMIT]}
