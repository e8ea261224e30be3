"""Tenants: every piece of work belongs to one; `default` always exists. Created and given quotas by people."""

from dataclasses import dataclass

from sqlalchemy import bindparam, func, select, update

from console.db import locks
from console.db.upsert import insert_for
from console.domain import names
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.words import said_back
from console.extensions import db
from console.models import Run, Tenant
from console.models.runs import live
from console.services import inputs
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict, Forbidden, InvalidInput, NotFound

DEFAULT = "default"
# The quotas a person may set, with their bounds: each is checked on every claim or submit, never a safety limit.
QUOTAS = {"max_running": (1, 100_000), "max_queued": (1, 10_000_000)}
# Built once: every API call looks its tenant up by name, and building the statement and its cache key each time
# cost more than SQLite's read.
_BY_NAME = select(Tenant).where(Tenant.name == bindparam("name"))


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
    if not names.is_name(name):
        return None  # no such name can exist
    return db.session.execute(_BY_NAME, {"name": name}).scalar_one_or_none()


def require(name: str, field: str = "tenant") -> Tenant:
    """Return the named tenant or raise a 422 that names the field."""
    tenant = find(name)
    if tenant is None:
        raise InvalidInput(f"no tenant named {name!r}", field)
    return tenant


def all_tenants() -> list[Tenant]:
    """Return every tenant, by name."""
    return db.session.execute(select(Tenant).order_by(Tenant.name)).scalars().all()


def visible(name: str, scope: int | None) -> Tenant:
    """Return the named tenant if this scope may see it; NotFound otherwise (another tenant's is not confirmed)."""
    tenant = find(name)
    if tenant is None or (scope is not None and tenant.id != scope):
        raise NotFound(f"no tenant named {name!r}")
    return tenant


def keep_within(name: str, scope: int | None, what: str) -> None:
    """Refuse a tenant filter outside the caller's scope, rather than quietly showing (or acting on) their own."""
    if name and scope is not None:
        own = db.session.execute(select(Tenant.name).where(Tenant.id == scope)).scalar_one()
        if name != own:
            raise Forbidden(f"you see only tenant {own}'s {what}; remove tenant={name[:64]} from the filter", "tenant")


def quota(field: str, raw) -> int:
    """Return a quota as a whole number within its bounds, or a 422 that says what to send."""
    low, high = QUOTAS[field]
    hint = f"{field} must be a whole number from {low} to {high}, got {said_back(raw)}"
    if isinstance(raw, bool):
        raise InvalidInput(hint, field)
    if isinstance(raw, str):
        raw = raw.strip()
        if not (inputs.is_digits(raw) and len(raw) <= 9):
            raise InvalidInput(hint, field)
        raw = int(raw)
    if not isinstance(raw, int) or not low <= raw <= high:
        raise InvalidInput(hint, field)
    return raw


def _snapshot(tenant: Tenant) -> dict:
    return {"name": tenant.name, "max_running": tenant.max_running, "max_queued": tenant.max_queued}


def _unscoped(scope: int | None, what: str) -> None:
    # A tenant-limited admin raising their own quota would escape the limit set for them.
    if scope is not None:
        raise Forbidden(f"only a person or token not limited to a tenant may {what}")


def create(name, actor: Actor, *, max_running=None, max_queued=None, scope: int | None = None,
           clock: Clock = SYSTEM_CLOCK) -> Tenant:
    """Create a tenant with its quotas (the model's defaults where not given); audited. 409 if the name exists."""
    _unscoped(scope, "create tenants")
    name = (name or "").strip() if isinstance(name, str) else name
    inputs.name(name, "tenant")
    values = {"name": name, "created_at": clock()}
    for field, raw in (("max_running", max_running), ("max_queued", max_queued)):
        if raw not in (None, ""):
            values[field] = quota(field, raw)
    connection = db.session.connection()
    # One tenant per name is the unique index's to say, not a read first: two people creating it at once get
    # one tenant and one 409.
    inserted = connection.execute(insert_for(connection)(Tenant.__table__).values(**{
        "max_running": Tenant.max_running.default.arg, "max_queued": Tenant.max_queued.default.arg, **values})
        .on_conflict_do_nothing(index_elements=["name"]).returning(Tenant.__table__.c.id)).scalar_one_or_none()
    if inserted is None:
        db.session.rollback()
        raise Conflict(f"a tenant named {name!r} exists already", "name")
    tenant = db.session.get(Tenant, inserted)
    audit.record(db.session, actor, "tenant.create", "tenant", name, after=_snapshot(tenant), tenant=name, clock=clock)
    db.session.commit()
    return tenant


def set_quota(tenant: Tenant, actor: Actor, *, max_running=None, max_queued=None, scope: int | None = None,
              clock: Clock = SYSTEM_CLOCK) -> Tenant:
    """Change a tenant's quotas (those given); audited with before and after. Takes effect at the next claim."""
    _unscoped(scope, "change a tenant's quotas")
    changes = {field: quota(field, raw) for field, raw in (("max_running", max_running), ("max_queued", max_queued))
               if raw not in (None, "")}
    if not changes:
        raise InvalidInput("give max_running, max_queued or both", "max_running")
    current = locks.fresh_row(Tenant, tenant.id)
    before = _snapshot(current)
    if all(before[field] == value for field, value in changes.items()):
        db.session.rollback()  # the same values again change nothing, and write no audit row saying nothing
        return current
    db.session.execute(update(Tenant).where(Tenant.id == tenant.id).values(**changes)
                       .execution_options(synchronize_session=False))
    db.session.refresh(current)
    audit.record(db.session, actor, "tenant.set_quota", "tenant", current.name, before=before,
                 after=_snapshot(current), tenant=current.name, clock=clock)
    db.session.commit()
    return current


@dataclass(frozen=True)
class Usage:
    """A tenant with its quotas and what it uses of them now."""

    tenant: Tenant
    running: int
    queued: int

    def as_dict(self) -> dict:
        return {"name": self.tenant.name, "max_running": self.tenant.max_running,
                "max_queued": self.tenant.max_queued, "running": self.running, "queued": self.queued,
                "created_at": self.tenant.created_at.isoformat() if self.tenant.created_at else None}


def usage(scope: int | None) -> list[Usage]:
    """Return the tenants this scope sees, each with its running and queued (pending or retry_wait) runs now."""
    query = select(Tenant).order_by(Tenant.name)
    if scope is not None:
        query = query.where(Tenant.id == scope)
    shown = db.session.execute(query).scalars().all()
    counts = select(Run.tenant_id, Run.status, func.count()).where(
        Run.status.in_(("running", "pending", "retry_wait")), live(), Run.tenant_id.in_([t.id for t in shown]))
    per: dict[int, dict[str, int]] = {}
    for tenant_id, status, count in db.session.execute(counts.group_by(Run.tenant_id, Run.status)):
        per.setdefault(tenant_id, {})[status] = count
    return [Usage(t, per.get(t.id, {}).get("running", 0),
                  per.get(t.id, {}).get("pending", 0) + per.get(t.id, {}).get("retry_wait", 0)) for t in shown]
