"""The raw-input checks several services share (console/services/inputs.py)."""

from console.services import inputs


def test_blank_is_spaces_and_invisible_characters_only():
    assert inputs.blank("") and inputs.blank(" \t\u00a0") and inputs.blank("\u200b\u200e\u2066\x07")
    assert not inputs.blank(" a ") and not inputs.blank("\u200bé") and not inputs.blank("٣")


def test_digits_are_ascii_and_few_enough_for_int():
    assert inputs.is_digits("42") and not inputs.is_digits("٣") and not inputs.is_digits("9" * 5000)
    assert inputs.typed_whole("-7") == -7 and inputs.typed_whole("9" * 5000) == "9" * 5000


def test_a_key_refuses_controls_and_invisible_characters_but_keeps_joiners():
    assert inputs.key_refusal("order-7/été") is None and inputs.key_refusal("👩\u200d💻") is None
    assert "'\\t' at position 2" in str(inputs.key_refusal("a\tb"))
    assert "U+FEFF (zero width no-break space) at position 1" in str(inputs.key_refusal("\ufeffa", "key"))
    # Accepted before, each looking like another key (helper 98).
    for char, name in (("\u00a0", "no-break space"), ("\u3164", "hangul filler"), ("\u2800", "braille pattern blank"),
                       ("\u034f", "combining grapheme joiner")):
        assert f"{name}) at position 2" in str(inputs.key_refusal(f"a{char}b")), char
    assert "U+2028 (line separator) at position 2" in str(inputs.key_refusal("a\u2028b"))
    assert "must not start or end with a space" in str(inputs.key_refusal(" padded "))
    assert inputs.key_refusal("order 7") is None
