"""Who is doing something: a person, a token, or the system itself."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    name: str
    id: int | None = None
    remote_addr: str | None = None
    # Four eyes: who approved what this person requested ("alex, request #7"), when it runs later on their behalf.
    approved_by: str | None = None
    # What acted for the person, when not their own hand ("runbook replay_dead_letters, execution #7").
    via: str | None = None
    # The tenant this person or token is limited to (None: every tenant), for rules about what every tenant shares.
    tenant_id: int | None = None

    @property
    def signature(self) -> str:
        """Name who did it on a record's "by" field: both people when it ran on an approval (at most 80 chars)."""
        if self.approved_by is None:
            return self.name
        return f"{self.name} (approved by {self.approved_by})"[:80]


SYSTEM = Actor("system")
DEMO = Actor("demo")  # what seeds the demo data
