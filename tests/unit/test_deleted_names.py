"""A deleted task's freed name reads as its old one, marked deleted; live names are left as they are."""

from console.domain import deleted_names


def test_a_freed_name_reads_as_the_old_one_marked_deleted():
    assert deleted_names.shown(deleted_names.freed("nightly-export", 19)) == "nightly-export (deleted)"


def test_the_longest_name_is_cut_to_fit_the_column_with_its_mark():
    freed = deleted_names.freed("x" * 120, 123456)
    assert len(freed) == 120 and freed.endswith("~deleted-123456")
    assert deleted_names.shown(freed) == "x" * 105 + " (deleted)"


def test_live_names_and_none_are_left_as_they_are():
    assert [deleted_names.shown(name) for name in ("billing: daily", "a-deleted-5", "", None)] == [
        "billing: daily", "a-deleted-5", "", None]
