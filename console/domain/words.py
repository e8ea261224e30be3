"""Words as people write them: counts ("1 run", "2 runs"; "1 run waits", "2 runs wait"), a refused value said back."""


def plural(count: int, word: str, many: str | None = None) -> str:
    """Say a count with its noun, singular for exactly one: plural(1, "run") is "1 run"; `many` for an odd plural."""
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"


def agree(count: int, one: str, many: str) -> str:
    """Pick the word that agrees with a count: agree(1, "is", "are") is "is"."""
    return one if count == 1 else many


def listed(items: list[str]) -> str:
    """Join words as a sentence lists them: "a", "a and b", "a, b and c" ("" for none)."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}" if items else ""


def said_back(value: object, limit: int = 40) -> str:
    """Say a refused value back in at most `limit` characters: a 5,000-digit one is named, not echoed whole."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() >= 128:
        return f"a {len(str(abs(value)))}-digit number"
    if isinstance(value, str) and not value.strip():
        return "nothing"  # an empty box (a browser empties a number box it cannot read: 5,000 digits), not "got ''"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…"
