"""Werkzeug's URL builders compiled once per test process instead of once per app.

Each `create_app` binds ~165 rules, and Werkzeug generates and compiles two Python functions for each (the URL
builders): 95 % of the 60-70 ms an app costs, paid by every test. A builder's code depends only on the rule's parsed
parts, the names of its defaults and whether unknown arguments are appended; the function is bound to its rule
afterwards. Reaches into `Rule._compile_builder` (pinned in pyproject.toml, guarded by
tests/contracts/test_werkzeug_internals.py).
"""

import contextlib

from werkzeug.routing import Rule

_original = Rule._compile_builder


def _remembered(cache: dict):
    def compile_builder(rule: Rule, append_unknown: bool = True):
        defaults = rule.defaults or {}
        if any(dynamic and name in defaults for dynamic, name in rule._trace):
            # A default of a variable part is baked in through the rule's own converter: not shared.
            return _original(rule, append_unknown)
        key = (rule.rule, tuple(rule._trace), tuple(defaults), append_unknown)
        builder = cache.get(key)
        if builder is None:
            builder = cache[key] = _original(rule, append_unknown)
        return builder

    return compile_builder


@contextlib.contextmanager
def remembered():
    """Within the block, rules with the same parts share one compiled builder."""
    before = Rule._compile_builder
    Rule._compile_builder = _remembered({})
    try:
        yield
    finally:
        Rule._compile_builder = before
