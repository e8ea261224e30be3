"""The DLQ area's blueprint and what its pages share: the work order link, the way back to the page a form came from."""

from urllib.parse import parse_qsl, urlencode, urlsplit

from flask import Blueprint, current_app, redirect, request, url_for

from console.services.dlq import filters as dlq_filters

bp = Blueprint("dlq", __name__, url_prefix="/dlq")


@bp.context_processor
def links():
    def work_order_url(order_id: int) -> str | None:
        # The Work orders area links here once it is registered; until then the order shows inline only.
        if "workorders.show" in current_app.view_functions:
            return url_for("workorders.show", order_id=order_id)
        return None

    return {"work_order_url": work_order_url}


def list_url(came_from: str | None = None) -> str:
    """Return the DLQ page a person came from (`came_from`, else the referrer) with its filters, else the list."""
    parts = urlsplit(came_from or request.referrer or "")
    index = url_for("dlq.index")
    if parts.path == index and parts.netloc in ("", request.host):  # only ever this page: never a way off the site
        return f"{index}?{parts.query}" if parts.query else index
    return url_for("dlq.index", view="list")


def go_back(filters: dlq_filters.Filters | None = None, **extra):
    """Redirect to the DLQ page the request came from (keeping its filters), else to the DLQ page (with `filters`)."""
    referrer = urlsplit(request.referrer or "")
    index = url_for("dlq.index")
    if referrer.netloc == request.host and referrer.path == index:
        query = {**dict(parse_qsl(referrer.query)), **extra}
        return redirect(f"{index}?{urlencode(query)}" if query else index, 303)
    return redirect(url_for("dlq.index", **(filters.args() if filters else {}), **extra), 303)
