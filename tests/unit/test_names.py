"""The one rule for the names of tenants, retry policies, conflict templates and quota classes."""

import pytest

from console.domain import names
from console.services.errors import InvalidInput
from console.services.inputs import name


@pytest.mark.parametrize("value", ["default", "a", "nightly-batch.v2_x", "9" * 64])
def test_a_name_of_1_to_64_lowercase_letters_digits_dots_dashes_underscores_is_one(value):
    assert names.is_name(value) and name(value, "policy") == value


@pytest.mark.parametrize("value", ["", "-x", "Upper", "nightly\n", "a\u0000b", "a" * 65, "n" * 10_000, "a b", None, 7,
                                   ["a"]])
def test_anything_else_is_no_name_and_a_422_saying_the_rule(value):
    assert not names.is_name(value)
    with pytest.raises(InvalidInput, match=r"quota class names are 1-64 lowercase letters") as refused:
        name(value, "quota class", "rules.quota_class")
    assert refused.value.field == "rules.quota_class" and len(refused.value.detail) < 300
