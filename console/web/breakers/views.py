"""Breakers: each circuit breaker (per handler, or per handler and tenant), live, with an audited reset."""

import redis
from flask import Blueprint, abort, flash, redirect, request, url_for

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.domain.words import plural
from console.extensions import htmx
from console.services.engine import breaker_admin
from console.services.engine.breakers import BreakerKey
from console.services.errors import ServiceError
from console.services.inputs import row_id
from console.services.people.permissions import OPERATE, VIEW
from console.web.render import page

bp = Blueprint("breakers", __name__, url_prefix="/breakers")


def _page(notice: tuple[str, str] | None = None):
    now = utcnow()
    return page("breakers/index.html", "live", board=breaker_admin.board(now, tenant_scope()), now=now,
                notice=notice, scoped=tenant_scope())


@bp.get("/")
@requires(VIEW)
def index():
    return _page()


def _key(handler: str) -> BreakerKey:
    """The breaker a reset names: the handler's shared one, or one tenant's (the form's `tenant`, an id)."""
    tenant = request.form.get("tenant", "")
    if not tenant:
        return BreakerKey(handler)
    try:
        return BreakerKey(handler, row_id(tenant))
    except ValueError:
        abort(400, f"tenant must be a tenant's id, got {tenant[:40]!r}")


# Handler names hold ':' and '.' (plugin:billing.charge), and may hold '/', hence the path converter.
@bp.post("/<path:handler>/reset")
@requires(OPERATE)
def reset(handler: str):
    key = _key(handler)
    if key.tenant_id is None and tenant_scope() is not None:
        # Checked before anything else so the refusal is the same whether or not the breaker has state.
        abort(403, "A handler-wide breaker is shared by every tenant; resetting one needs an account not limited "
                   "to a tenant.")
    try:
        before = breaker_admin.reset(key, current_actor(), scope=tenant_scope())
        was = before.state.value.replace("_", " ")
        notice = ("success", f"Reset the breaker of {breaker_admin.describe(key)} (it was {was}, "
                             f"{plural(before.consecutive_failures, 'failure')} in a row). Calls go through again.")
    except ServiceError as error:
        notice = ("error", error.detail)
    except (redis.RedisError, OSError) as error:
        notice = ("error", f"Redis is unreachable, so nothing was reset ({type(error).__name__}).")
    if htmx:
        # htmx swaps only 2xx answers; the notice in the fragment says how it went.
        return _page(notice)
    flash(notice[1], notice[0])
    return redirect(url_for("breakers.index"), 303)
