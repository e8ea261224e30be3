"""Characters that change how text reads without showing themselves, written out so a reader sees them.

A right-to-left override (U+202E) before "0001" makes it read "1000": on an approval page the second person would
approve a value other than the one stored (the "Trojan Source" trick). Each such character is written as its
JSON escape, \\u202e, which JSON text reads back as the character itself.
"""

import re

# Bidirectional controls, zero-width space and word joiner, the byte-order mark, and C0/C1 controls other than
# tab, newline and carriage return (WTForms starts a textarea's text with CR LF). Zero-width (non-)joiners are
# left: emoji sequences and Persian words need them.
_HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
                     "\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def has_hidden(text: str) -> bool:
    """Tell whether the text holds a character this module writes out."""
    return _HIDDEN.search(text) is not None


def shown(text: str) -> str:
    """Write each hidden character as its \\uXXXX escape."""
    return _HIDDEN.sub(lambda found: f"\\u{ord(found[0]):04x}", text)
