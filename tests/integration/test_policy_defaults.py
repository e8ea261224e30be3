"""The policies YAML file loaded at start: a breaker scope is read from it, and a bad one stops the start."""

import pytest

from console.services.policies import versions as policies


def test_a_policy_file_sets_the_breaker_scope(app, tmp_path):
    path = tmp_path / "policies.yaml"
    path.write_text("partner-api:\n  description: per tenant\n"
                    "  breaker: {failure_threshold: 3, scope: handler_and_tenant}\n")
    assert policies.load_defaults(str(path)) == ["partner-api"]
    spec = policies.current_version(policies.get("partner-api")).spec
    assert (spec["breaker_scope"], spec["breaker_failure_threshold"]) == ("handler_and_tenant", 3)


def test_a_bad_breaker_scope_in_the_file_stops_the_start_naming_it(app, tmp_path):
    path = tmp_path / "policies.yaml"
    path.write_text("partner-api:\n  breaker: {scope: tenant}\n")
    with pytest.raises(SystemExit) as stopped:
        policies.load_defaults(str(path))
    assert str(stopped.value) == (f"{path}: policy 'partner-api': policy.breaker.scope: breaker.scope must be one of "
                                  "handler, handler_and_tenant, got 'tenant'")
    assert policies.find("partner-api") is None
