"""Counts in words, as people write them: "1 run", "2 runs"."""


def plural(count: int, word: str, many: str | None = None) -> str:
    """Say a count with its noun, singular for exactly one: plural(1, "run") is "1 run"; `many` for an odd plural."""
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"
