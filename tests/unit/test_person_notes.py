"""A reason or note a person writes beside a change: one check for every service that takes one."""

import pytest

from console.domain.notes import MAX_NOTE_CHARS
from console.services import inputs
from console.services.errors import InvalidInput


def test_a_note_is_stripped_and_an_empty_optional_one_is_none():
    assert inputs.note("  checked with billing \n", "note") == "checked with billing"
    assert inputs.note("   ", "note") is None and inputs.note(None, "note") is None
    assert inputs.note("x" * MAX_NOTE_CHARS, "reason") == "x" * MAX_NOTE_CHARS


@pytest.mark.parametrize(("value", "missing", "message"), [
    (None, "give a reason: the approver reads it", "give a reason: the approver reads it"),
    (" \t", "give a reason: the approver reads it", "give a reason: the approver reads it"),
    (5, None, "reason must be text"),
    (["a list"], "give a reason", "reason must be text"),
    ("x" * (MAX_NOTE_CHARS + 1), None, "keep the reason to at most 2,000 characters"),
])
def test_a_refused_note_says_what_to_fix_at_its_field(value, missing, message):
    with pytest.raises(InvalidInput) as refused:
        inputs.note(value, "reason", missing=missing)
    assert (refused.value.detail, refused.value.field) == (message, "reason")

