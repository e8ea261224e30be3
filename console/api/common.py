"""Helpers every API view uses: the JSON body, and the tenant a request may act for."""

from flask import request

from console.auth import tenant_scope
from console.extensions import db
from console.models import Tenant
from console.services.errors import Forbidden, InvalidInput, ServiceError
from console.services.inputs import is_id  # noqa: F401 - the API views use it from here
from console.services.people import tenants


class BadRequest(ServiceError):
    status = 400
    code = "bad_request"


def body() -> dict:
    """Return the request's JSON object, or raise a 400 that says what is wrong."""
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise BadRequest("send a JSON object with Content-Type: application/json")
    return data


def acting_tenant(name) -> Tenant:
    """Return the tenant this request acts for: the named one, checked against the token's scope."""
    scope = tenant_scope()
    if name is not None and not isinstance(name, str):
        raise InvalidInput("tenant is a tenant name", "tenant")
    if scope is not None:
        own = db.session.get(Tenant, scope)
        if name not in (None, own.name):
            raise Forbidden(f"this token may act only for tenant {own.name}", "tenant")
        return own
    return tenants.require(name or tenants.DEFAULT)
