"""How a runbook's params and changes read on a page (its execution's, and the approval that gates it)."""

import json


def value_text(value) -> str:
    """Show a param or change value: text as it is, anything else as compact JSON."""
    if value is None:
        return "—"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
