"""Text in a CSV cell that a spreadsheet would run as a formula (CWE-1236), written so it shows as text."""

# Error codes, messages, task names and audit notes come from callers and people.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def as_text(value: str) -> str:
    """Return the text, with a quote first when a spreadsheet would read it as a formula (OWASP's advice)."""
    return "'" + value if value.startswith(FORMULA_START) else value
