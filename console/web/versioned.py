"""Versioned edit pages (retry policies, conflict templates): the version an editor started from, and the refusal
of a save over a version someone else saved meanwhile (the service checks it under the record's lock)."""

from console.services import versioning
from console.services.errors import StaleVersion


def base_version(form) -> int | None:
    """Return the version the editor started from (None on a new record's page: nothing to compare)."""
    return versioning.from_form(form.base_version.data)


def refuse_stale(form, error: StaleVersion, next_step: str) -> None:
    """Say who saved which version meanwhile and the page's next step; the next save may replace that version."""
    form.attach(None, f"{error.summary}; {next_step}")
    form.base_version.data = str(error.current)
