"""The audit log: who changed what, when, from what to what."""

from flask import Blueprint, Response, current_app, render_template, request

from console.auth import current_actor, every_tenants_view, requires, tenant_scope
from console.domain import diff
from console.domain.clock import utcnow
from console.extensions import db
from console.models import Tenant
from console.services.audit import export as audit_export
from console.services.audit import query as audit_query
from console.services.audit import trail as audit
from console.services.errors import Forbidden, InvalidInput
from console.services.people import tenants
from console.services.people.permissions import ADMIN, VIEW
from console.web.render import page

bp = Blueprint("audit", __name__, url_prefix="/audit")
EXPORT_BATCH = 1000


@bp.get("/")
@requires(VIEW)
def index():
    scope = tenant_scope()
    tenant = _tenant(scope)
    asked, refused = audit_query.from_args(request.args)
    # An address that names no page shows no rows: what it says to fix, and the newest with the filters that were good.
    entries, next_seq = ([], None) if refused else audit_query.page(**asked, tenant=tenant)
    filters = {key: asked[key] for key in audit_query.FILTERS}
    filters.update({key: asked[key].isoformat() if asked[key] else "" for key in audit_query.DAYS})
    query = {key: value for key, value in filters.items() if value}
    if asked["hide_sign_ins"]:
        query["hide_signins"] = "1"
    if tenant and scope is None:
        query["tenant"] = filters["tenant"] = tenant
    tenant_names = [] if scope else [t.name for t in tenants.all_tenants()]
    return page("audit/index.html", "results", entries=entries, next_seq=next_seq, filters=filters, query=query,
                tenant_names=tenant_names,
                hide_sign_ins=asked["hide_sign_ins"], refused=refused, field_changes=_field_changes,
                shown=diff.shown), 422 if refused else 200


@bp.get("/export.<any(csv, jsonl):kind>")
@requires(VIEW)
def export(kind: str):
    """Every row the filters select, oldest first, as CSV or JSON lines: evidence taken out whole, audited itself."""
    tenant = _tenant(tenant_scope())
    asked, refused = audit_query.from_args(request.args)
    if refused:
        raise InvalidInput("Fix the address: " + "; ".join(refused), "since")
    asked.pop("before_seq")
    shown = {key: value.isoformat() if hasattr(value, "isoformat") else value for key, value in asked.items() if value}
    # Who took which rows out is itself on the record, before the first row leaves.
    audit.record(db.session, current_actor(), "audit.export", "audit_log", kind, after={"filters": shown},
                 tenant=tenant)
    db.session.commit()
    name = f"rebound-audit-{utcnow():%Y%m%d-%H%M%S}.{kind}"
    return Response(_streamed(current_app._get_current_object(), kind, asked, tenant),
                    mimetype=audit_export.MIMETYPES[kind],
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _tenant(scope: int | None) -> str | None:
    """Return the tenant whose rows are read: a limited person's own; for others the one asked for (?tenant=), or
    None for every row. Another tenant asked by a limited person is a 403, an unknown one a 422 (it was ignored)."""
    own = db.session.get(Tenant, scope).name if scope else None
    wanted = (request.args.get("tenant") or "").strip()
    if not wanted or wanted == own:
        return own
    if own is not None:
        raise Forbidden("the audit log shows you your own tenant's rows only", "tenant")
    return tenants.require(wanted).name


def _streamed(app, kind: str, asked: dict, tenant: str | None):
    """Yield the file a batch at a time, each read in an app context of its own: the rows are read while the response
    is sent, after the request's context has ended, and no context may stay open across a yield."""
    yield audit_export.header(kind)
    after_seq = 0
    while True:
        with app.app_context():
            rows = [audit_export.as_dict(entry) for entry in
                    audit_query.batch(after_seq, size=EXPORT_BATCH, **asked, tenant=tenant)]
        if rows:
            yield audit_export.encode(kind, rows)
        if len(rows) < EXPORT_BATCH:
            return
        after_seq = rows[-1]["seq"]


def _field_changes(before, after) -> list[diff.FieldChange]:
    """An edit's changed fields, when both sides are objects (a create or a delete has one side: shown whole); a
    request for approval's, from the before and after of the change it asks for."""
    if isinstance(before, dict) and isinstance(after, dict):
        return diff.changes(before, after)
    asked = after if before is None and isinstance(after, dict) else {}
    if isinstance(asked.get("before"), dict) and isinstance(asked.get("after"), dict):
        return diff.changes(asked["before"], asked["after"])
    return []


@bp.get("/verify")
@requires(ADMIN)
@every_tenants_view("The hash chain holds every tenant's audit rows, and its check counts them")
def verify():
    return render_template("audit/_verify.html", report=audit.verify(db.session))
