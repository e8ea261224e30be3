"""Fields named like a secret are masked in rows kept for good (the audit chain); words about a secret are kept."""

import json

from console.domain.secrets import CHANGED, MASK, mask_fields, mask_pair


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


def test_a_header_s_authorization_and_credentials_are_secrets_too():
    headers = {"Authorization": "Bearer abc.def", "X-Api-Key": "k1", "credentials": {"user": "ops", "pass": "x"}}
    assert mask_fields(headers) == {"Authorization": MASK, "X-Api-Key": MASK, "credentials": MASK}


def test_json_written_as_text_is_masked_inside_and_other_text_is_kept():
    """A runbook's params parameter is a JSON object typed into a text box: its token went into the chain in clear."""
    typed = '{"fail_times": 0, "token": "S3CR-rbtok"}'
    assert json.loads(mask_fields({"params": typed})["params"]) == {"fail_times": 0, "token": MASK}
    for kept in ('{"fail_times": 0}', "{not json", "[" * 100_000, "token=x in words"):
        assert mask_fields({"note": kept})["note"] == kept  # unchanged, byte for byte


def test_one_fields_change_is_masked_as_it_would_be_under_its_name():
    assert mask_pair("sk_live_1", "sk_live_1", "api_key") == (MASK, MASK)
    assert mask_pair("sk_live_1", "sk_live_2", "api_key") == (MASK, CHANGED)
    assert mask_pair({"token": "t", "n": 1}, {"token": "t", "n": 2}, "params") == ({"token": MASK, "n": 1},
                                                                                    {"token": MASK, "n": 2})
    assert mask_pair("eu", "us", "region") == ("eu", "us")


def test_a_secret_that_changes_says_so_on_its_after_side_without_its_value():
    """Masked alike, an api_key replaced under a params fix read "***" → "***": no change, and the approver's page
    counted one field where there were two (helper 149)."""
    before = {"params": {"fail_times": 5, "api_key": "sk-OLD123", "nested": {"db_password": "pw-OLD-777"},
                         "token": "kept-1"}}
    after = {"params": {"fail_times": 0, "api_key": "sk-NEW456", "nested": {"db_password": "pw-NEW-888"},
                        "token": "kept-1", "secret": "added-9"}}
    assert mask_pair(before, after) == (
        {"params": {"fail_times": 5, "api_key": MASK, "nested": {"db_password": MASK}, "token": MASK}},
        {"params": {"fail_times": 0, "api_key": CHANGED, "nested": {"db_password": CHANGED}, "token": MASK,
                    "secret": MASK}})
    assert mask_fields(CHANGED) == CHANGED and mask_fields({"api_key": CHANGED}) == {"api_key": CHANGED}
    assert mask_pair(None, after)[1]["params"]["api_key"] == MASK  # nothing before it: added, not changed


def test_a_secret_fields_value_is_masked_wherever_else_the_params_repeat_it():
    """A viewer read `"message": "upstream refused key sk_live_…"` beside `"api_key": "***"` (helper 121); JSON
    typed into a text box (a params fix's params) counts too."""
    key = "sk_live_SECRET12345"
    params = {"api_key": key, "message": f"upstream refused key {key}", "log": [f"calling with {key}"], "n": 1}
    assert mask_fields(params) == {"api_key": MASK, "message": f"upstream refused key {MASK}",
                                   "log": [f"calling with {MASK}"], "n": 1}
    typed = {"params": json.dumps({"api_key": "sk_live_RBK777", "note": "key sk_live_RBK777"})}
    assert json.loads(mask_fields(typed)["params"]) == {"api_key": MASK, "note": f"key {MASK}"}
    assert mask_fields({"token": "abc", "note": "abc is short"}) == {"token": MASK, "note": "abc is short"}
