"""Tenants: every piece of work belongs to one; `default` always exists."""

from sqlalchemy import select

from console.db.upsert import insert_for
from console.extensions import db
from console.models import Tenant
from console.services.errors import InvalidInput

DEFAULT = "default"


def ensure_default() -> Tenant:
    """Return the default tenant, creating it on first use (every process calls this; two may start at once)."""
    tenant = find(DEFAULT)
    if tenant is None:
        db.session.execute(insert_for(db.session.connection())(Tenant).values(name=DEFAULT)
                           .on_conflict_do_nothing(index_elements=["name"]))
        db.session.commit()
        tenant = find(DEFAULT)
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
