"""Versioned records (retry policies, conflict templates): a save may name the version it was based on."""

import re
from collections.abc import Callable

from console.extensions import db
from console.services.errors import Conflict, InvalidInput, StaleVersion
from console.services.inputs import MAX_ID, is_id

FIELD = "base_version"
_DIGITS = re.compile(r"[0-9]{1,10}")


def from_json(value) -> int | None:
    """Return the base version a JSON body names (None: not given, no check); anything else is a 422."""
    if value is None:
        return None
    if not is_id(value) or value < 1:
        raise InvalidInput("base_version is the version you read (the `version` a GET returns), a whole number "
                           "from 1; leave it out to save without the check", FIELD)
    return value


def from_form(text: str | None) -> int | None:
    """Return the base version a form's hidden field holds (empty: a new record's form, no check)."""
    text = (text or "").strip()
    if not text:
        return None
    if not _DIGITS.fullmatch(text) or not 1 <= int(text) <= MAX_ID:
        raise InvalidInput("the page's version field was changed; reload the page")  # a hidden field: no field to mark
    return int(text)


def check(base: int | None, what: str, current: int | None, saved_by: Callable[[], str]) -> None:
    """Refuse a save based on any version but the one in force; call it under the record's lock, read afresh.

    `current` is None when the record does not exist (deleted meanwhile, or never created). A refusal ends the
    caller's transaction first, so the record's lock is not kept.
    """
    if base is None or base == current:
        return
    if current is None:
        refusal = Conflict(f"{what} does not exist, so there is no version {base} to replace; leave out base_version "
                           "to create it", FIELD)
    else:
        refusal = StaleVersion(saved_by(), current, base)  # read before the rollback expires the record
    db.session.rollback()
    raise refusal
