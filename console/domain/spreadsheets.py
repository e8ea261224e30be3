"""Text in a CSV cell that a spreadsheet would run as a formula (CWE-1236), written so it shows as text."""

# Error codes, messages, task names and audit notes come from callers and people.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# What a CSV file starts with: Excel reads a file without it as the PC's legacy code page ("Ã·" for "÷"); other
# spreadsheets and csv readers opening it as utf-8-sig skip it.
BOM = "\ufeff"


def as_text(value: str) -> str:
    """Return the text, with a quote first when a spreadsheet would read it as a formula (OWASP's advice)."""
    return "'" + value if value.startswith(FORMULA_START) else value
