"""Keys people type and paste back (idempotency keys, mutex keys, error codes): no character that hides itself."""

import unicodedata

# Joiners shape Persian, Indic scripts and emoji: format characters a key may hold.
_JOINERS = ("\u200c", "\u200d")
# Letters and marks that draw nothing: a key holding one looks like another key (helper 98).
_BLANK_LOOKING = frozenset("\u034f\u115f\u1160\u3164\uffa0\u2800")


def _named(char: str) -> str:
    return f"U+{ord(char):04X} ({unicodedata.name(char, 'unnamed').lower()})"


def hidden(key: str, field: str) -> str | None:
    """Say what in a key a person cannot see or type back: a control character, a line break, an invisible format
    character or an odd space (NUL: PostgreSQL refuses it in a string; a newline, tab or zero-width space: a key
    nobody can type or paste back as it is, and two keys that look alike), or a space at an end; None if nothing."""
    for position, char in enumerate(key, start=1):
        category = unicodedata.category(char)
        if category in ("Cc", "Zl", "Zp"):
            held = repr(char) if char.isascii() else _named(char)
            return f"{field} must not contain control characters such as newlines or tabs; it holds {held} at " \
                   f"position {position}"
        if (category == "Cf" and char not in _JOINERS) or char in _BLANK_LOOKING or (category == "Zs" and char != " "):
            return (f"{field} must not contain invisible characters or spaces other than a plain one; it holds "
                    f"{_named(char)} at position {position}")
    if key.strip(" ") and key != key.strip(" "):  # one of spaces only is refused as blank, where blanks are
        return f"{field} must not start or end with a space"
    return None
