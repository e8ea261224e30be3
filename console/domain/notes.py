"""How long a reason or note a person writes beside a change may be: one limit, whatever the change."""

# A discard's reason, a request's reason, a decision's or rollback's note, a runbook's reason, a resolve's or a work
# order's closing note, a compensation's cause. Every column that keeps one is TEXT, so the limit is the reader's
# (a reason is read before deciding), not the database's.
MAX_NOTE_CHARS = 2_000


def too_long(what: str) -> str:
    """Say how long `what` ("reason", "note", "cause") may be, as every service and form refuses a longer one."""
    return f"keep the {what} to at most {MAX_NOTE_CHARS:,} characters"
