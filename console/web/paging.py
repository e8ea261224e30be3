"""The `?before=` row id every newest-first list pages by."""

from flask import request

from console.services.errors import InvalidInput
from console.services.inputs import row_id


def before() -> int | None:
    """Return the row id to continue below; a 422 that says what to send when the address names none."""
    text = request.args.get("before", "")
    if not text:
        return None
    try:
        return row_id(text)
    except ValueError:
        shown = text[:40] + ("…" if len(text) > 40 else "")
        raise InvalidInput(f"before={shown} is not a row id (a whole number from 1): drop it from the address to see "
                           "the newest page", "before") from None
