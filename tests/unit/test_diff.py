"""A before → after diff people can read."""

from console.domain.diff import changes


def test_ids_held_as_keys_are_in_number_order():
    """A bulk discard's letters read 107…117 before 70 (text order)."""
    before = {"dead_letters": {str(i): "open" for i in (107, 70, 9, 117)}}
    after = {"dead_letters": {str(i): "discarded" for i in (107, 70, 9, 117)}}
    assert [c.path for c in changes(before, after)] == [
        "dead_letters.9", "dead_letters.70", "dead_letters.107", "dead_letters.117"]


def test_other_keys_keep_their_text_order_after_numbers():
    assert [c.path for c in changes({"b": 1, "a": 1, "10": 1, "2": 1}, {})] == ["2", "10", "a", "b"]
