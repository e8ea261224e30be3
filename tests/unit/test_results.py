"""A handler's result is stored as JSON: what JSON cannot hold is kept as a bounded stand-in, never refused later."""

import json

from console.services.engine.results import RESULT_LIMIT, json_safe


def test_json_passes_as_it_is():
    assert json_safe({"rows": 3, "ok": True, "names": ["a"]}) == {"rows": 3, "ok": True, "names": ["a"]}


def test_a_number_json_cannot_hold_becomes_its_repr():
    # PostgreSQL's json type refuses NaN and Infinity: storing them would fail the outcome's bookkeeping.
    assert json_safe({"mean": float("nan")}) == {"repr": "{'mean': nan}"}
    assert json_safe([float("inf")]) == {"repr": "[inf]"}
    json.dumps(json_safe(float("-inf")), allow_nan=False)


def test_a_large_result_is_cut_to_the_limit():
    kept = json_safe("x" * (RESULT_LIMIT + 10))
    assert set(kept) == {"truncated"} and len(kept["truncated"]) == RESULT_LIMIT
