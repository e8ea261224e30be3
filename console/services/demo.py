"""Demo data, so a fresh console has something to look at."""

from sqlalchemy import func, select

from console.extensions import db
from console.models import Task, Tenant


def is_empty() -> bool:
    """Tell whether no task has been registered yet."""
    return db.session.execute(select(func.count()).select_from(Task)).scalar_one() == 0


def seed() -> str:
    """Create demo tenants; return a one-line summary."""
    created = []
    for name in ("acme", "globex"):
        if db.session.execute(select(Tenant).where(Tenant.name == name)).scalar_one_or_none() is None:
            db.session.add(Tenant(name=name, max_running=20, max_queued=500))
            created.append(name)
    db.session.commit()
    return f"Demo data: tenants {', '.join(created) or 'already there'}."
