"""Fields named like a secret are masked in rows kept for good (the audit chain); words about a secret are kept."""

from console.domain.secrets import MASK, mask_fields


def test_secret_named_fields_are_masked_at_any_depth():
    value = {"params": {"api_key": "sk_live_1", "auth": [{"db_password": "hunter2", "user": "ops"}], "Token": 7},
             "retry_token": "rt-1", "fail_times": 0}
    assert mask_fields(value) == {"params": {"api_key": MASK, "auth": [{"db_password": MASK, "user": "ops"}],
                                             "Token": MASK}, "retry_token": "rt-1", "fail_times": 0}


def test_words_about_a_secret_are_kept():
    said = {"secret": "…ABCD", "routing_key": "set", "signature": "unreadable", "password": None,
            "secret_enabled": True, "api_key": ""}
    assert mask_fields(said) == said
    assert mask_fields("password=x") == "password=x" and mask_fields(None) is None
