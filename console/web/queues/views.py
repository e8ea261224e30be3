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
    return page("queues/index.html", "live", board=queues.board(now, tenant_scope()), now=now, run_href=run_href,
                worker_defaults=worker_defaults.rows(), worker_file=worker_defaults.source())
