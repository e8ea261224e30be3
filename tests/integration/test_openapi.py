"""The OpenAPI document: served openly, valid, and in step with the routes the app really has."""

import re

import jsonschema
import pytest
import referencing
import referencing.jsonschema
import yaml

from console.api.openapi import DOCUMENT
from tests.factories import bearer

API_PREFIXES = ("/worker/", "/internal/", "/events", "/api/")
IGNORED_METHODS = {"HEAD", "OPTIONS"}


def openapi_path(rule: str) -> str:
    """Turn Flask's `/worker/tasks/<int:run_id>` into OpenAPI's `/worker/tasks/{run_id}`."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def api_routes(app) -> dict[str, set[str]]:
    """Return the methods of every JSON API route, by OpenAPI path."""
    routes: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith(API_PREFIXES) or rule.rule == "/healthz":
            routes.setdefault(openapi_path(rule.rule), set()).update(rule.methods - IGNORED_METHODS)
    return routes


@pytest.fixture
def document(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    return response.json


def test_document_is_served_without_a_token_and_parses(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.json["openapi"].startswith("3.1")
    scheme = response.json["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert response.json["security"] == [{"bearerAuth": []}]


def test_flask_placeholders_become_openapi_parameters():
    assert openapi_path("/worker/tasks/<int:run_id>/cancel") == "/worker/tasks/{run_id}/cancel"
    assert openapi_path("/internal/policies/<name>") == "/internal/policies/{name}"


def test_every_api_route_is_documented_with_the_same_methods(app, document):
    routes = api_routes(app)
    assert "/worker/tasks/{run_id}" in routes  # the conversion found the parameterised rules
    documented = {path: {method.upper() for method in item if method != "parameters"}
                  for path, item in document["paths"].items()}
    for path, methods in routes.items():
        assert path in documented, f"{path} is not in openapi.yaml"
        assert documented[path] == methods, path


def test_every_write_documents_its_422(document):
    # Each refuses a body field it does not read (or takes none): a 422 its document did not list (helper 135).
    missing = [f"{method.upper()} {path}" for path, item in document["paths"].items()
               for method, operation in item.items()
               if method in ("post", "put", "patch", "delete") and "422" not in operation["responses"]]
    assert missing == []


def test_documented_path_parameters_match_the_flask_rules(document):
    for path, item in document["paths"].items():
        named = set(re.findall(r"{([^}]+)}", path))
        declared = {p["name"] for p in item.get("parameters", []) if "$ref" not in p}
        declared |= {document["components"]["parameters"][p["$ref"].rsplit("/", 1)[1]]["name"]
                     for p in item.get("parameters", []) if "$ref" in p}
        assert declared == named, path


def test_only_public_routes_waive_the_bearer_token(app, document):
    for rule in app.url_map.iter_rules():
        path = openapi_path(rule.rule)
        if path not in document["paths"]:
            continue
        public = app.view_functions[rule.endpoint].required_permission is None
        for method in rule.methods - IGNORED_METHODS:
            operation = document["paths"][path][method.lower()]
            assert (operation.get("security") == []) == public, f"{method} {path}"


def test_document_is_valid_openapi(document):
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(document)


class _StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping, which the safe loader silently collapses."""


def _mapping_without_repeats(loader, node, deep=False):
    keys = [loader.construct_object(key, deep=deep) for key, _ in node.value]
    repeated = sorted({str(key) for key in keys if keys.count(key) > 1})
    assert not repeated, f"openapi.yaml repeats {repeated} in one mapping near line {node.start_mark.line + 1}"
    return loader.construct_mapping(node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_repeats)


def test_no_key_is_given_twice_in_one_mapping():
    # A merge once interleaved three operations: GET /api/workflows/{id} then documented a runbook's 202s, and
    # POST /api/workflows lost its body and responses, with the file still valid OpenAPI (found by schemathesis).
    yaml.load(DOCUMENT.read_text(), Loader=_StrictLoader)


def _keys_without_a_value(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            if value is None:
                yield "/".join(map(str, (*path, key)))
            yield from _keys_without_a_value(value, (*path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _keys_without_a_value(item, (*path, index))


def test_no_key_is_left_without_a_value():
    # In a flow mapping, an unquoted description's comma starts a new key: "description: Its log so far, a line
    # each." made a key "a line each." with no value, and the description stopped at "so far".
    assert list(_keys_without_a_value(yaml.safe_load(DOCUMENT.read_text()))) == []


def test_a_task_with_neither_cron_nor_event_is_a_valid_registration(client, auth, document):
    """The server takes it (it runs only by hand, as the README says) while the schema asked for cron or event, so a
    client validating against it refused what the server accepts (helper 123)."""
    resource = referencing.Resource.from_contents(document, default_specification=referencing.jsonschema.DRAFT202012)
    validator = jsonschema.Draft202012Validator({"$ref": "urn:rebound#/components/schemas/TaskInput"},
                                                registry=referencing.Registry().with_resource("urn:rebound", resource))
    manual = {"name": "manual-only", "tenant": "default", "handler": "demo.noop"}
    assert list(validator.iter_errors(manual)) == []
    assert list(validator.iter_errors({**manual, "cron": "0 * * * *"})) == []
    assert [e.validator for e in validator.iter_errors({**manual, "crontab": "0 * * * *"})] == ["unevaluatedProperties"]
    registered = client.post("/internal/tasks/register", json=manual,
                             headers=bearer(auth.make_user("svc", "operator")))
    assert registered.status_code == 201 and (registered.json["cron"], registered.json["event"]) == (None, None)
    # A cron of spaces is none, as an empty one is (it was a 422 "expression is empty").
    blank = client.post("/internal/tasks/register", json={**manual, "name": "blank", "cron": "  "},
                        headers=bearer(auth.make_user("svc2", "operator")))
    assert blank.status_code == 201 and blank.json["cron"] is None
