"""Breakers: each handler's circuit breaker, live, with an audited reset."""

import redis
from flask import Blueprint, abort, flash, redirect, url_for

from console.auth import current_actor, requires, shared_by_all_tenants, tenant_scope
from console.domain.clock import utcnow
from console.extensions import htmx
from console.services.engine import breaker_admin
from console.services.errors import ServiceError
from console.services.people.permissions import OPERATE, VIEW
from console.web.render import page

bp = Blueprint("breakers", __name__, url_prefix="/breakers")


def _page(notice: tuple[str, str] | None = None):
    now = utcnow()
    return page("breakers/index.html", "live", board=breaker_admin.board(now, tenant_scope()), now=now,
                notice=notice, shared_only=tenant_scope() is not None)


@bp.get("/")
@requires(VIEW)
def index():
    return _page()


# Handler names hold ':' and '.' (plugin:billing.charge), and may hold '/', hence the path converter.
@bp.post("/<path:handler>/reset")
@requires(OPERATE)
@shared_by_all_tenants("Circuit breakers")
def reset(handler: str):
    if tenant_scope() is not None:
        abort(403, "A breaker is shared by every tenant; resetting one needs an account not limited to a tenant.")
    try:
        before = breaker_admin.reset(handler, current_actor())
        notice = ("success", f"Reset the breaker of {handler} (it was {before.state.value.replace('_', ' ')}, "
                             f"{before.consecutive_failures} failures in a row). Calls go through again.")
    except ServiceError as error:
        notice = ("error", error.detail)
    except (redis.RedisError, OSError) as error:
        notice = ("error", f"Redis is unreachable, so nothing was reset ({type(error).__name__}).")
    if htmx:
        # htmx swaps only 2xx answers; the notice in the fragment says how it went.
        return _page(notice)
    flash(notice[1], notice[0])
    return redirect(url_for("breakers.index"), 303)
