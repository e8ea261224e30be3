"""What each kind of approved change does: apply it once (keeping a backup), and roll it back if it can be."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from console.models import Approval
from console.services.actor import Actor


@dataclass(frozen=True)
class Applied:
    """What an applied change leaves: the rows as they were, and what to do once its transaction commits."""

    backup: dict
    after_commit: Callable[[], None] = field(default=lambda: None)
    outcome: str | None = None  # what it did, in words: the request's outcome, for the API and the CLI
    # The change as made, shaped as the request's `after`, when rows had moved on since it was asked (None: as asked).
    change: dict | None = None


@dataclass(frozen=True)
class Restored:
    """What a rollback put back, shaped as the request's `after` (before) and `before` (after)."""

    before: dict
    after: dict
    left: str | None = None  # what stayed as it is now, in words, when rows had moved on since the change


@dataclass(frozen=True)
class FixKind:
    name: str
    title: str  # what the approver reads: "Edit a dead letter's params, then replay it"
    apply: Callable[[Approval, Actor, datetime], Applied]  # in the caller's transaction; raises ServiceError
    # Restores the backup (returning what it restored when that is not all the request changed), or raises Conflict.
    rollback: Callable[[Approval, Actor, datetime], "Restored | None"] | None = None
    # Why a rollback would be refused now, for the page to say instead of offering one (None: it may be tried).
    why_kept: Callable[[Approval], str | None] | None = None
    # What a request refused by a person (rejected, withdrawn) closes at once, in the decision's transaction.
    refused: Callable[[Approval, str, str | None, datetime], None] | None = None
    # Why a kind without a rollback has none, for its executed request's page to say (it offered nothing, silently).
    no_rollback: str | None = None
    # Why the request cannot be approved yet (a runbook's preview still running), or None: approving waits.
    not_ready: Callable[[Approval], str | None] | None = None
