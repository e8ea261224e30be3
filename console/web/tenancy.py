"""The tenant a person's new task or workflow goes to: the one chosen, which a tenant-limited person cannot leave."""

from console.auth import tenant_scope
from console.extensions import db
from console.models import Tenant
from console.services.errors import Forbidden
from console.services.people import tenants


def acting_tenant(name: str, what: str) -> Tenant:
    """Return the chosen tenant (a tenant-limited person's own when none is chosen); refuse another one."""
    scope = tenant_scope()
    if scope is None:
        return tenants.require(name)
    own = db.session.get(Tenant, scope)
    if name not in ("", own.name):
        raise Forbidden(f"you may {what} only for tenant {own.name}", "tenant")
    return own
