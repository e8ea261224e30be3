"""Counts in words, as people write them: "1 run", "2 runs"; "1 run waits", "2 runs wait"."""


def plural(count: int, word: str, many: str | None = None) -> str:
    """Say a count with its noun, singular for exactly one: plural(1, "run") is "1 run"; `many` for an odd plural."""
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"


def agree(count: int, one: str, many: str) -> str:
    """Pick the word that agrees with a count: agree(1, "is", "are") is "is"."""
    return one if count == 1 else many
