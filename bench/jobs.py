"""The bare-RQ baseline's job: a function that does nothing, like demo.noop."""


def noop():
    """Do nothing."""
    return {"ok": True}
