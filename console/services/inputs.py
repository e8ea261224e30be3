"""Checks of raw JSON values that several services share."""


def is_id(value) -> bool:
    """Tell whether a JSON value is a row id (a whole number; `true` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)
