"""Tenants over the API: list them with their quotas and use now, create one, set its quotas (admins)."""

from flask import Blueprint, jsonify, url_for

from console.api.common import body, known_args, no_unknown
from console.auth import current_actor, requires, tenant_scope
from console.services.people import tenants
from console.services.people.permissions import ADMIN

bp = Blueprint("tenants_api", __name__)
FIELDS = {"name", "max_running", "max_queued"}


def _checked(data: dict, allowed: set[str]) -> dict:
    no_unknown(data, allowed)
    return data


def _one(tenant) -> dict:
    [row] = [u for u in tenants.usage(tenant_scope()) if u.tenant.id == tenant.id]
    return row.as_dict()


@bp.get("/api/tenants")
@requires(ADMIN)
def list_tenants():
    known_args(())  # it has no filters: ?tenant=other answered as if it had one
    return jsonify(tenants=[row.as_dict() for row in tenants.usage(tenant_scope())])


@bp.post("/api/tenants")
@requires(ADMIN)
def create_tenant():
    data = _checked(body(), FIELDS)
    tenant = tenants.create(data.get("name"), current_actor(), max_running=data.get("max_running"),
                            max_queued=data.get("max_queued"), scope=tenant_scope())
    return jsonify(_one(tenant)), 201, {"Location": url_for("tenants_api.get_tenant", name=tenant.name)}


@bp.get("/api/tenants/<name>")
@requires(ADMIN)
def get_tenant(name: str):
    return jsonify(_one(tenants.visible(name, tenant_scope())))


@bp.put("/api/tenants/<name>")
@requires(ADMIN)
def set_quota(name: str):
    data = _checked(body(), FIELDS - {"name"})
    tenant = tenants.set_quota(tenants.visible(name, tenant_scope()), current_actor(),
                               max_running=data.get("max_running"), max_queued=data.get("max_queued"),
                               scope=tenant_scope())
    return jsonify(_one(tenant))
