"""The audit log: who changed what, when, from what to what."""

from flask import Blueprint, render_template, request

from console.auth import requires, tenant_scope
from console.domain import diff
from console.extensions import db
from console.models import Tenant
from console.services.audit import query as audit_query
from console.services.audit import trail as audit
from console.services.inputs import row_id
from console.services.people.permissions import ADMIN, VIEW
from console.web.render import page

bp = Blueprint("audit", __name__, url_prefix="/audit")


@bp.get("/")
@requires(VIEW)
def index():
    scope = tenant_scope()
    tenant = db.session.get(Tenant, scope).name if scope else None
    filters = {key: request.args.get(key, "").strip() for key in ("actor", "action", "target")}
    hide_sign_ins = request.args.get("hide_signins") == "1"
    before = request.args.get("before", type=row_id)
    entries, next_seq = audit_query.page(**filters, hide_sign_ins=hide_sign_ins, before_seq=before, tenant=tenant)
    query = dict(filters, hide_signins="1") if hide_sign_ins else filters
    return page("audit/index.html", "results", entries=entries, next_seq=next_seq, filters=filters, query=query,
                hide_sign_ins=hide_sign_ins, field_changes=_field_changes, shown=diff.shown)


def _field_changes(before, after) -> list[diff.FieldChange]:
    """An edit's changed fields, when both sides are objects (a create or a delete has one side: shown whole)."""
    return diff.changes(before, after) if isinstance(before, dict) and isinstance(after, dict) else []


@bp.get("/verify")
@requires(ADMIN)
def verify():
    return render_template("audit/_verify.html", report=audit.verify(db.session))
