"""The audit log: who changed what, when, from what to what."""

from flask import Blueprint, render_template, request

from console.auth import every_tenants_view, requires, tenant_scope
from console.domain import diff
from console.extensions import db
from console.models import Tenant
from console.services.audit import query as audit_query
from console.services.audit import trail as audit
from console.services.people.permissions import ADMIN, VIEW
from console.web.render import page

bp = Blueprint("audit", __name__, url_prefix="/audit")


@bp.get("/")
@requires(VIEW)
def index():
    scope = tenant_scope()
    tenant = db.session.get(Tenant, scope).name if scope else None
    asked, refused = audit_query.from_args(request.args)
    # An address that names no page shows no rows: what it says to fix, and the newest with the filters that were good.
    entries, next_seq = ([], None) if refused else audit_query.page(**asked, tenant=tenant)
    filters = {key: asked[key] for key in audit_query.FILTERS}
    query = {key: value for key, value in filters.items() if value}
    if asked["hide_sign_ins"]:
        query["hide_signins"] = "1"
    return page("audit/index.html", "results", entries=entries, next_seq=next_seq, filters=filters, query=query,
                hide_sign_ins=asked["hide_sign_ins"], refused=refused, field_changes=_field_changes,
                shown=diff.shown), 422 if refused else 200


def _field_changes(before, after) -> list[diff.FieldChange]:
    """An edit's changed fields, when both sides are objects (a create or a delete has one side: shown whole)."""
    return diff.changes(before, after) if isinstance(before, dict) and isinstance(after, dict) else []


@bp.get("/verify")
@requires(ADMIN)
@every_tenants_view("The hash chain holds every tenant's audit rows, and its check counts them")
def verify():
    return render_template("audit/_verify.html", report=audit.verify(db.session))
