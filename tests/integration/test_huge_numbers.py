"""A number too large for a float or a 64-bit column, in any field of any JSON body, is a 4xx: never a 500."""

import re
from pathlib import Path

import pytest
import yaml

from tests.factories import bearer

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "console" / "api" / "openapi.yaml").read_text())
# JSON carries integers of any size and Python reads them up to 4,300 digits: float() and math.isfinite() raise
# OverflowError past 1e308 (a policy's max_attempts, an alert threshold and a bulk replay's rate were a 500), a
# database column past 2**63.
HUGE = (10**400, 2**64)


def _resolve(reference: str) -> dict:
    node = SPEC
    for part in reference.lstrip("#/").split("/"):
        node = node[part]
    return node


def _fields(schema, at=(), seen=()) -> set[tuple[str, ...]]:
    """Every field a body schema declares, as its path of keys (("policy", "max_attempts")), at any depth."""
    if not isinstance(schema, dict):
        return set()
    if "$ref" in schema:
        return set() if schema["$ref"] in seen else _fields(_resolve(schema["$ref"]), at, (*seen, schema["$ref"]))
    found = set()
    for name, value in schema.get("properties", {}).items():
        found |= {(*at, name)} | _fields(value, (*at, name), seen)
    for key in ("oneOf", "anyOf", "allOf"):
        for option in schema.get(key, []):
            found |= _fields(option, at, seen)
    return found


def _bodies() -> list[tuple[str, str, list]]:
    """Every (method, path, fields) of the API that takes a JSON body, its ids filled with 1."""
    found = []
    for path, operations in SPEC["paths"].items():
        for method, operation in operations.items():
            if isinstance(operation, dict) and "requestBody" in operation:
                fields, request = set(), operation["requestBody"]
                request = _resolve(request["$ref"]) if "$ref" in request else request
                for content in request.get("content", {}).values():
                    fields |= _fields(content.get("schema", {}))
                found.append((method, re.sub(r"\{[a-z_]+\}", "1", path), sorted(fields)))
    return sorted(found)


def _nested(keys: tuple[str, ...], value) -> dict:
    for key in reversed(keys):
        value = {key: value}
    return value


@pytest.mark.parametrize(("method", "path", "fields"), _bodies(), ids=lambda x: x if isinstance(x, str) else "")
def test_a_huge_number_in_any_field_of_a_body_is_a_4xx(client, auth, method, path, fields):
    admin = bearer(auth.make_user("root", "admin"))
    failures = []
    for keys in fields:
        for value in HUGE:
            body = _nested(keys, value)
            try:
                status = getattr(client, method)(path, json=body, headers=admin).status_code
            except Exception as error:  # noqa: BLE001 - the test client re-raises what the app did not handle
                status = f"{type(error).__name__}: {error}"
            if not isinstance(status, int) or status >= 500:
                failures.append(f"{'.'.join(keys)}={value:.3g}: {status}")
    assert fields and not failures, "\n".join(failures[:20])


@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "/api/tenants", {"name": "acme", "max_running": 10**400}),
    ("post", "/ops/capacity/reserve", {"tenant": "default", "running_slots": 10**400, "starts_at": "2030-01-01T00:00Z",
                                       "ends_at": "2030-01-02T00:00Z", "reason": "batch"}),
    ("post", "/worker/tasks", {"task_id": 10**400}),
    ("put", "/internal/policies/default", {"max_attempts": 10**400}),
])
def test_a_huge_number_refused_is_named_not_echoed_whole(client, auth, method, path, body):
    """Each 422 said all 401 digits back."""
    answer = getattr(client, method)(path, json=body, headers=bearer(auth.make_user("root", "admin")))
    assert answer.status_code == 422 and "a 401-digit number" in answer.json["detail"]
    assert len(answer.json["detail"]) < 200
