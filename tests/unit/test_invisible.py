"""Characters that hide what text says are written out as JSON escapes; everything else is left as it is."""

import json

import pytest

from console.domain import invisible


@pytest.mark.parametrize("hidden", ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c", "\u200b", "\ufeff",
                                    "\x1b", "\x00", "\x85"])
def test_each_hidden_character_is_written_as_its_escape_which_json_reads_back(hidden):
    text = f"account {hidden}0001"
    assert invisible.has_hidden(text)
    shown = invisible.shown(text)
    assert hidden not in shown and shown == f"account \\u{ord(hidden):04x}0001"
    assert json.loads(f'"{shown}"') == text  # inside JSON text the escape is the character again


@pytest.mark.parametrize("text", ["plain", "tab\tand\r\nnewline", "日本語", "👨\u200d👩\u200d👧", "می\u200cخواهم", "é"])
def test_visible_text_emoji_joiners_and_persian_non_joiners_are_left(text):
    assert not invisible.has_hidden(text) and invisible.shown(text) == text
