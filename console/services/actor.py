"""Who is doing something: a person, a token, or the system itself."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    name: str
    id: int | None = None
    remote_addr: str | None = None
    # Four eyes: who approved what this person requested ("alex, request #7"), when it runs later on their behalf.
    approved_by: str | None = None


SYSTEM = Actor("system")
