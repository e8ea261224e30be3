"""Who is doing something: a person, a token, or the system itself."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    name: str
    id: int | None = None
    remote_addr: str | None = None


SYSTEM = Actor("system")
