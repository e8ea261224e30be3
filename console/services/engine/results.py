"""Handler results made storable: JSON only, and bounded."""

import json

RESULT_LIMIT = 16_000


def json_safe(value):
    """Return the value if it is JSON of at most RESULT_LIMIT characters, else a bounded stand-in that is."""
    try:
        text = json.dumps(value, allow_nan=False)  # NaN is no JSON: PostgreSQL refuses it
    except (TypeError, ValueError):
        try:
            # Dates, decimals, UUIDs... as their text. The value itself is not handed on: the database's JSON
            # encoder knows no `default`, and refusing it there left the run `running` for the reconciler.
            text = json.dumps(value, default=str, allow_nan=False)
        except (TypeError, ValueError):
            return {"repr": repr(value)[:RESULT_LIMIT]}
        value = json.loads(text)
    return value if len(text) <= RESULT_LIMIT else {"truncated": text[:RESULT_LIMIT]}
