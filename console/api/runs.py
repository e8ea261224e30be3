"""Runs over the API: every run a token may see, filtered, newest first, one keyset page at a time."""

from datetime import UTC, datetime

from flask import Blueprint, jsonify, request

from console.api import serialize
from console.api.common import acting_tenant, cursor_arg, known_args, task_arg, whole_arg
from console.auth import requires, tenant_scope
from console.domain.periods import through_named_day
from console.domain.statuses import RunStatus
from console.services.engine import handler_kinds
from console.services.errors import InvalidInput
from console.services.people.permissions import VIEW
from console.services.runs import query as run_query

bp = Blueprint("runs_api", __name__)
MAX_LIMIT = 200
FIELDS = ("tenant", "task", "handler", "status", "code", "q", "since", "until", "limit", "before")
MAX_TEXT = 200  # as the Runs page's Text box
STATUSES = tuple(status.value for status in RunStatus)


def _moment(name: str) -> datetime | None:
    """Read an ISO 8601 time from the query (UTC when it gives no offset), or a 422 that shows one."""
    raw = request.args.get(name, "")
    if not raw:
        return None
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(f"{name} is an ISO 8601 time such as 2026-12-04T16:15:08Z or 2026-12-04T17:15:08+01:00 "
                           "(UTC when it gives no offset)", name) from None
    if not 1970 <= when.year <= 9998:
        raise InvalidInput(f"{name} lies between the years 1970 and 9998", name)
    return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)


def _filters() -> run_query.RunFilters:
    known_args(FIELDS)
    args = request.args
    statuses = tuple(s for s in args.get("status", "").split(",") if s)
    wrong = [s for s in statuses if s not in STATUSES]
    if wrong:
        raise InvalidInput(f"status {wrong[0][:40]!r} is none of {', '.join(STATUSES)} (several: comma-separated)",
                           "status")
    code, handler = args.get("code", ""), args.get("handler", "")
    if len(code) > 80:
        raise InvalidInput("code is at most 80 characters", "code")
    text = args.get("q", "").strip()
    if len(text) > MAX_TEXT:
        raise InvalidInput(f"q is at most {MAX_TEXT} characters", "q")
    if handler and args.get("task"):
        raise InvalidInput("filter by task or by handler (runs submitted without a task), not both", "handler")
    since, until = _moment("since"), _moment("until")
    if until is not None:
        until = through_named_day(request.args["until"], until)  # a bare date: through that day, as the page's
    if since and until and until <= since:
        raise InvalidInput("until must be after since", "until")
    return run_query.RunFilters(
        tenant_id=acting_tenant(args["tenant"]).id if args.get("tenant") else None,
        task_id=task_arg(), statuses=statuses, created_from=since, created_to=until,
        error_code=code, text=text, handler="{}:{}".format(*handler_kinds.parse(handler)) if handler else "")


@bp.get("/api/runs")
@requires(VIEW)
def list_runs():
    """Runs newest first: pass `next_before` as `before` for the next page."""
    filters = _filters()
    found = run_query.page(filters, scope=tenant_scope(), before=cursor_arg("before"),
                           limit=whole_arg("limit", 50, 1, MAX_LIMIT))
    # A text search reads a window of ids at a time, as the Runs page does: `searched` says which, and next_before
    # goes on below it even when this page came back short.
    more = {"searched": list(found.searched)} if found.searched else {}
    return jsonify(runs=[serialize.run_summary(run) for run in found.runs], next_before=found.next_before, **more)
