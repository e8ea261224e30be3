"""The raw-input checks several services share (console/services/inputs.py)."""

from console.services import inputs


def test_blank_is_spaces_and_invisible_characters_only():
    assert inputs.blank("") and inputs.blank(" \t\u00a0") and inputs.blank("\u200b\u200e\u2066\x07")
    assert not inputs.blank(" a ") and not inputs.blank("\u200bé") and not inputs.blank("٣")


def test_digits_are_ascii_and_few_enough_for_int():
    assert inputs.is_digits("42") and not inputs.is_digits("٣") and not inputs.is_digits("9" * 5000)
    assert inputs.typed_whole("-7") == -7 and inputs.typed_whole("9" * 5000) == "9" * 5000
