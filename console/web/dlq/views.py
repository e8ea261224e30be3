"""The DLQ page: open dead letters grouped by error or listed, filtered and searched, a group's newest entries."""

from dataclasses import replace

from flask import redirect, render_template, request, url_for

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import htmx
from console.redis_conn import read_or
from console.services.dlq import bulk as dlq_bulk
from console.services.dlq import filters as dlq_filters
from console.services.dlq import groups as dlq
from console.services.engine import breaker_admin
from console.services.errors import NotFound
from console.services.inputs import is_digits
from console.services.people import tenants
from console.services.people.permissions import VIEW
from console.services.recovery import bulk_discard, params_fix
from console.web import paging
from console.web.dlq.blueprint import bp
from console.web.render import page


def chosen_view() -> str:
    """Return the view asked for: the Entries list (view=list, or view=entries as its button names it), else the
    groups (view=entries showed the groups; helper 164)."""
    return "list" if request.values.get("view") in ("list", "entries") else "groups"


def _groups_from() -> int:
    """Return how many larger groups the page skips (?groups_from=50: the next fifty); anything else is none."""
    value = request.args.get("groups_from", "")
    return int(value) if is_digits(value) and len(value) <= 6 else 0


def _opened() -> str:
    """Return the group shown expanded (?open=<fingerprint>, so Back and a shared link keep it open), or ""."""
    value = request.args.get("open", "")
    return value if dlq_filters.FINGERPRINT.fullmatch(value) else ""


def discard_matching_link(filters: dlq_filters.Filters) -> str | None:
    """Return the `discard_dead_letters` runbook's form filled in with these filters, or None when they say what it
    cannot (a period, replayed letters, a handler's runs without a task): the DLQ discarded a page's ticked rows at
    most (helper 153)."""
    task, handler = (filters.task, "") if filters.task.isdigit() else ("", filters.task.removeprefix("handler:"))
    unsaid = replace(filters, q="", task="", tenant="", age="", code="", group="")
    if unsaid != dlq_filters.Filters() or filters.task.startswith(dlq_filters.UNTASKED):
        return None
    given = {"code": filters.code, "task": task, "handler": handler, "search": filters.q, "age": filters.age,
             "group": filters.group, "tenant": filters.tenant}
    return url_for("runbooks.show", name="discard_dead_letters", **{k: v for k, v in given.items() if v})


def results(filters: dlq_filters.Filters, view: str, before: int | None = None, notice=None) -> dict:
    """Return what the results region shows: groups, or one page of entries."""
    scope = tenant_scope()
    context = {"filters": filters, "view": view, "before": before, "results_notice": notice, "opened": "",
               "count_cap": dlq.COUNT_CAP, "search_window": dlq_filters.SEARCH_WINDOW,
               "default_rate": dlq_bulk.DEFAULT_RATE, "max_rate": dlq_bulk.MAX_RATE,
               "discard_matching": discard_matching_link(filters),
               "fast_chunk": dlq_bulk.FAST_CHUNK,
               # The group filter's chip names the error as people read it, not its fingerprint.
               "group_named": dlq.group_words(filters.group, scope) if filters.group else None,
               # Open circuit breakers: a replay's run waits for its own, as its button says.
               "held": held_handlers(scope)}
    if view == "list":
        every = dlq.window(filters, scope, utcnow())  # what "Replay all matching" counts, whatever the page
        found = dlq.entries(filters, scope, before, within=every)
        context.update(discard_limit=bulk_discard.threshold(),
                       # more ticked than this files a request instead: the limit less what they discarded lately
                       discard_left=bulk_discard.allowance(current_actor(), utcnow()),
                       letters=found.entries, next_before=found.next_before, search_floor=found.search_floor,
                       replays=dlq.replays(found.entries), task_names=dlq.task_names(found.entries),
                       fixes=fixes_of(found.entries), requests=requests_of(found.entries),
                       matching=dlq.count_matching(filters, scope, bounds=every),
                       matching_fixes=sum(dlq.fixes_waiting(filters, scope, every).values()),
                       explained=dlq.needs_explaining(filters, scope, every),
                       # Where this page is among them (a text search reads windows, so it has no position).
                       shown_from=None if filters.q else 1 + (dlq.count_newer(filters, scope, before, every)
                                                                 if before else 0))
    else:
        found = dlq.groups(filters, scope, limit=dlq.GROUP_LIMIT, offset=_groups_from())
        # Judged from each group's newest letters, as its own Replay button is; the server counts them all.
        context.update(groups=found.groups, more_groups=found.more, group_count=found.count,
                       groups_from=found.offset, group_page=dlq.GROUP_LIMIT, matching=found.total,
                       search_floor=found.search_floor, matching_fixes=found.fixes_waiting,
                       explained=any(group.failed_for_good or group.workflow_steps for group in found.groups))
        every = dlq_filters.Bounds(utcnow(), found.search_floor)
        opened = _opened()
        if opened and any(group.fingerprint == opened for group in found.groups):
            context.update(opened=opened, **_group_context(opened, replace(filters, group=opened)))
    # "Replay all matching" takes no letter newer than the page showed: pressed on a page drawn before someone else
    # replayed them, it would send a second wave at the letters the first wave's runs died into since.
    context["upto"] = dlq.newest_id(filters, scope, every) if filters.status == "open" else None
    return context


def _group_context(fingerprint: str, filters: dlq_filters.Filters) -> dict:
    """Return what one expanded group shows: its newest entries."""
    found = dlq.entries(filters, tenant_scope(), limit=10)
    return {"fingerprint": fingerprint, "group_filters": filters, "group_letters": found.entries,
            "group_more": found.next_before is not None, "group_replays": dlq.replays(found.entries),
            "group_task_names": dlq.task_names(found.entries), "group_fixes": fixes_of(found.entries),
            "group_requests": requests_of(found.entries)}


def fixes_of(letters) -> dict[int, int]:
    """Return the params fix waiting for approval of each open letter shown: letter id → request id."""
    return params_fix.waiting_on([letter.id for letter in letters if letter.status == "open"], utcnow())


def requests_of(letters) -> dict[int, list[tuple[str, int, bool]]]:
    """Return the other requests waiting for approval that name each open letter shown (a runbook's params fix, a
    bulk discard): letter id → [(what it asks, request id, whether the person may open it)]. A replay does not close
    them in its own transaction, so a row's Replay does not say it would: their supersede jobs close them once nothing
    of them is left. A bulk discard across tenants is only unscoped people's to open (its link was a 404 to a
    tenant's people; helper 140)."""
    ids, now, scope = [letter.id for letter in letters if letter.status == "open"], utcnow(), tenant_scope()
    found: dict[int, list[tuple[str, int, bool]]] = {}
    for letter_id, approval_id in params_fix.runbook_fixes_on(ids, now).items():
        found.setdefault(letter_id, []).append(("params fix (runbook)", approval_id, True))
    for letter_id, (approval_id, tenant_id) in bulk_discard.waiting_with_tenant(ids, now).items():
        found.setdefault(letter_id, []).append(("bulk discard", approval_id, scope is None or tenant_id is not None))
    return found


@bp.get("/")
@requires(VIEW)
def index():
    scope = tenant_scope()
    filters = dlq_filters.Filters.parse(request.args)
    refused = dlq_filters.refused(request.args) + dlq.unseen_task(filters.task, scope)
    op = request.args.get("op", "")
    notice = ("error", "Fix the filter: " + "; ".join(refused) + ".") if refused else None
    # Callables, so an htmx request that renders only the results block does not run their queries.
    return page("dlq/index.html", "results", **results(filters, chosen_view(), paging.before(),
                                                        notice=notice),
                scoped=scope is not None, bulk_ops=lambda: _bulk_panels(scope, op),
                task_choices=lambda: dlq.task_choices(scope, asked=filters.task),
                handler_choices=lambda: dlq.handler_choices(scope),
                tenant_choices=lambda: [] if scope else [t.name for t in tenants.all_tenants()]), \
        422 if refused else 200


def held_handlers(scope: int | None) -> breaker_admin.OpenBreakers:
    """Return the open breakers a replay may wait for (none while Redis does not answer: nobody can tell, and the
    page says Redis is unreachable)."""
    return read_or(lambda: breaker_admin.open_breakers(scope, utcnow()), breaker_admin.OpenBreakers())


def _bulk_panels(scope: int | None, include: str) -> list | None:
    """Return the bulk operations the page follows, or None while Redis does not answer (the page says so): the
    letters themselves are the database's, and a Redis incident is when people come here."""
    return read_or(lambda: dlq_bulk.recent(scope, include=include), None)


@bp.get("/groups/<fingerprint>")
@requires(VIEW)
def group_entries(fingerprint: str):
    if not dlq_filters.FINGERPRINT.fullmatch(fingerprint):
        raise NotFound(f"no error group {fingerprint!r}")
    filters = dlq_filters.Filters.parse({**request.args.to_dict(), "group": fingerprint})
    if not htmx:
        return redirect(url_for("dlq.index", view="list", **filters.args()))
    return render_template("dlq/_group_entries.html", **_group_context(fingerprint, filters),
                           held=held_handlers(tenant_scope()))
