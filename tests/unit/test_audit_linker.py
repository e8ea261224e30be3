"""The batch linker writes exactly the MAC that verify recomputes one row at a time from the stored columns."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from console.models import AuditEntry
from console.services.audit.chain import GENESIS, Linker, body, keyed_mac

KEY = b"k" * 32
AT = datetime(2026, 12, 1, 20, 15, 3, 123456, tzinfo=UTC)
SHARED = {"at": AT, "actor": "olga", "actor_id": 7, "action": "dead_letter.replay", "target_type": "dead_letter",
          "remote_addr": "10.0.0.7", "note": None}
ROWS = [
    {"seq": 1, "prev_hash": GENESIS, "target_id": "41", "tenant": "default", "before": {"status": "open"},
     "after": {"status": "replayed", "run_id": 9, "series": 2}},
    # What JSON columns give back differs from what was handed in: keys become strings (and sort as strings),
    # tuples lists; the MAC is of what the database gives back.
    {"seq": 2, "prev_hash": "ab" * 32, "target_id": "42", "tenant": "café \u2603", "before": None,
     "after": {9: "nine", 10: ("ten", 10.5), "z": [True, None]}},
    {"seq": 3, "prev_hash": "cd" * 32, "target_id": "", "tenant": None, "before": {"a": {"b": "\"quoted\""}},
     "after": "a plain string"},
    {"seq": 4, "prev_hash": "ef" * 32, "target_id": "x\u00e9", "tenant": "t", "before": {"ok": True, "gone": None},
     "after": {"ratio": 0.1, "n": -3, "big": 10**20, "é": "ü"}},
]


@pytest.mark.parametrize("shared_names", [(), ("tenant",), ("before", "note"), tuple(SHARED)])
def test_the_linker_gives_each_row_the_body_and_mac_of_the_row_as_stored(shared_names):
    shared = {name: value for name, value in SHARED.items() if name in shared_names}
    for row in ROWS:
        full = {**SHARED, **row}
        linker = Linker(KEY, {**shared, **({"tenant": row["tenant"]} if "tenant" in shared_names else {})})
        entry = AuditEntry(**full)
        assert linker.body(full) == body(entry)
        assert linker.mac(full) == keyed_mac(KEY, entry)


def test_the_moment_is_encoded_in_utc_whatever_zone_it_came_in():
    east = AT.astimezone(timezone(timedelta(hours=5)))
    full = {**SHARED, **ROWS[0], "at": east}
    assert Linker(KEY, {"at": east}).mac(full) == keyed_mac(KEY, AuditEntry(**{**full, "at": AT}))
