"""Queues & workers: what RQ holds and who works it, live."""

from flask import Blueprint, current_app, url_for

from console.auth import requires, tenant_scope
from console.domain.clock import utcnow
from console.services.people.permissions import VIEW
from console.services.system import queues, worker_defaults
from console.web.render import page

bp = Blueprint("queues", __name__, url_prefix="/queues")


def run_href(run_id: int) -> str:
    """Link a run's page (the Runs area's address, also before its blueprint is registered)."""
    if "runs.show" in current_app.view_functions:
        return url_for("runs.show", run_id=run_id)
    return f"/runs/{run_id}"


@bp.get("/")
@requires(VIEW)
def index():
    now = utcnow()
    scope = tenant_scope()
    # Queues and workers serve every tenant: their counts and times are every tenant's work, so a person limited to
    # a tenant sees the machinery (which workers live, on which queues) but not how busy other tenants keep it.
    return page("queues/index.html", "live", board=queues.board(now, scope), now=now, run_href=run_href,
                shared=scope is not None,
                worker_defaults=worker_defaults.rows(), worker_file=worker_defaults.source())
