"""Tenants: every piece of work belongs to one; `default` always exists."""

from sqlalchemy import select

from console.extensions import db
from console.models import Tenant
from console.services.errors import InvalidInput

DEFAULT = "default"


def ensure_default() -> Tenant:
    """Return the default tenant, creating it on first use."""
    tenant = find(DEFAULT)
    if tenant is None:
        tenant = Tenant(name=DEFAULT)
        db.session.add(tenant)
        db.session.commit()
    return tenant


def find(name: str) -> Tenant | None:
    """Return the tenant with this name, if any."""
    return db.session.execute(select(Tenant).where(Tenant.name == name)).scalar_one_or_none()


def require(name: str, field: str = "tenant") -> Tenant:
    """Return the named tenant or raise a 422 that names the field."""
    tenant = find(name)
    if tenant is None:
        raise InvalidInput(f"no tenant named {name!r}", field)
    return tenant


def all_tenants() -> list[Tenant]:
    """Return every tenant, by name."""
    return db.session.execute(select(Tenant).order_by(Tenant.name)).scalars().all()
