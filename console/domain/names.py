"""The names people give shared objects: tenants, retry policies, conflict templates, quota classes."""

import re

# As the API's path parameters spell it (openapi.yaml); checked with fullmatch, since `$` also matches before a
# trailing newline (a policy named "nightly\n" was created that no address could reach).
PATTERN = "^[a-z0-9][a-z0-9_.-]{0,63}$"
RULE = "1-64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
_NAME = re.compile(PATTERN.removeprefix("^").removesuffix("$"))


def is_name(value) -> bool:
    """Tell whether a value can be such a name; one that cannot (a NUL, 10,000 characters) must never reach a query."""
    # PostgreSQL refuses a NUL in a bound string: a 500, found by schemathesis.
    return isinstance(value, str) and _NAME.fullmatch(value) is not None
