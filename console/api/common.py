"""Helpers every API view uses: the JSON body, and the tenant a request may act for."""

from flask import current_app, request
from werkzeug.exceptions import BadRequest as HTTPBadRequest

from console.auth import tenant_scope
from console.domain.ids import MAX_ID
from console.extensions import db
from console.models import Tenant
from console.services.engine.submit import tenant_of_task
from console.services.errors import Forbidden, InvalidInput, ServiceError
from console.services.inputs import (
    is_digits,
    is_id,  # noqa: F401 - the API views use it from here
)
from console.services.people import tenants
from console.services.scheduling import task_query


class BadRequest(ServiceError):
    status = 400
    code = "bad_request"


class LengthRequired(ServiceError):
    status = 411
    code = "length_required"


class UnreadableJSON(ServiceError):
    status = 400
    code = "bad_json"  # as the request reader says of JSON too deep, or with a lone surrogate


def refuse_chunked() -> None:
    """Raise a 411 for a body sent chunked, without a Content-Length."""
    if request.content_length is None and "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        # WSGI reads no body it was not told the length of (the server may not end the stream): say so, rather
        # than "not valid JSON" about a body that was never read.
        raise LengthRequired(f"send the body with its Content-Length, not chunked; at most "
                             f"{current_app.config['MAX_CONTENT_LENGTH']:,} bytes (REBOUND_MAX_BODY_BYTES)")


def body() -> dict:
    """Return the request's JSON object, or raise a 400 that says what is wrong (a 413 past the size limit)."""
    if not request.is_json:
        raise BadRequest("send a JSON object with Content-Type: application/json")
    refuse_chunked()
    try:
        # Not silent: bytes that are not JSON (or not UTF-8) say so, instead of asking for a Content-Type the
        # request already has; a body past the size limit stays werkzeug's 413.
        data = request.get_json()
    except HTTPBadRequest:
        raise UnreadableJSON("the body is not valid JSON (nor UTF-8 text that holds it)") from None
    if not isinstance(data, dict):
        raise BadRequest("send a JSON object ({\"name\": value, ...}), not an array, a string or a number")
    return data


def no_unknown(data: dict, allowed) -> None:
    """Refuse a field the endpoint does not take (a typo would otherwise be dropped unseen): a 422 naming it."""
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        takes = f"allowed: {', '.join(sorted(allowed))}" if allowed else "this takes no body"
        raise InvalidInput(f"unknown field {unknown[0]!r}; {takes}", unknown[0])


def no_body(hint: str = "") -> None:
    """Refuse a body where the endpoint takes none: what it held was dropped unseen (params sent with a replay)."""
    try:
        no_unknown(body() if request.content_length else {}, ())
    except InvalidInput as refused:
        raise InvalidInput(f"{refused.detail}: {hint}" if hint else refused.detail, refused.field) from None


def known_args(allowed) -> None:
    """Refuse a query parameter the endpoint does not read: a typo (or another list's name for a filter) was
    dropped unseen, and the whole list answered as if unfiltered. A 422 naming it and what is allowed."""
    unknown = sorted(set(request.args) - set(allowed))
    if unknown:
        takes = f"allowed: {', '.join(sorted(allowed))}" if allowed else "this list takes no query parameters"
        raise InvalidInput(f"unknown parameter {unknown[0][:64]!r}; {takes}", unknown[0][:64])
    # ?status=dead&status=succeeded answered the dead runs alone: a client's second value was dropped unseen, as a
    # key given twice in a body would be (helper 113). No list reads more than one value of a parameter.
    repeated = next((name for name in request.args if len(request.args.getlist(name)) > 1), None)
    if repeated:
        raise InvalidInput(f"{repeated[:64]} is given {len(request.args.getlist(repeated))} times; this list reads one "
                           "value of it: send it once", repeated[:64])


def whole_arg(name: str, default: int | None, low: int, high: int) -> int | None:
    """Return a query argument that must be a whole number in [low, high] (default when absent), or a 422."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    if not is_digits(raw) or not low <= int(raw) <= high:
        raise InvalidInput(f"{name} must be a whole number from {low:,} to {high:,}", name)
    return int(raw)


def flag_arg(name: str) -> bool:
    """Return a yes/no query argument (absent: no), or a 422: a typo is not taken for "no"."""
    raw = request.args.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise InvalidInput(f"{name} is true or false (1 or 0, yes or no)", name)


def task_arg() -> int | None:
    """Return the `task` query argument as the id of a task this request may see (deleted ones too: their runs and
    letters remain), or a 422 as the pages give: an empty list read as "no runs of that task"."""
    task_id = whole_arg("task", None, 1, MAX_ID)
    if task_id is not None and not task_query.can_see(task_id, tenant_scope()):
        raise InvalidInput(f"no task with id {task_id} that you can see", "task")
    return task_id


def cursor_arg(name: str) -> int | None:
    """Return a keyset cursor (`before`: ids below it); one past every id a row can have bounds nothing."""
    value = whole_arg(name, None, 1, 2**63 - 1)
    return value if value is None or value <= MAX_ID else None


def acting_tenant(name) -> Tenant:
    """Return the tenant this request acts for: the named one, checked against the token's scope."""
    scope = tenant_scope()
    if name is not None and not isinstance(name, str):
        raise InvalidInput("tenant is a tenant name", "tenant")
    if scope is not None:
        own = db.session.get(Tenant, scope)
        if name not in (None, own.name):
            raise Forbidden(f"this token may act only for tenant {own.name}", "tenant")
        return own
    return tenants.require(name or tenants.DEFAULT)


def submission_tenant(named, task_id) -> Tenant:
    """Return the tenant a submission or an executor's report acts for: the one named, else a token of every
    tenant's task's own."""
    if named is None and task_id is not None and tenant_scope() is None:
        named = tenant_of_task(task_id)
        if named is None and is_id(task_id):  # no live task has it: "not in tenant default" would send them looking
            raise InvalidInput(f"no task {task_id}: give the id of a task that exists", "task_id")
    return acting_tenant(named)
