"""Admin → Alert rules: each rule's state and current value, and a form to change its threshold."""

from flask import flash, redirect, render_template, url_for

from console.auth import current_actor, every_tenants_view, requires, shared_by_all_tenants
from console.domain.clock import utcnow
from console.extensions import htmx
from console.services.errors import ServiceError
from console.services.people.permissions import ADMIN
from console.services.system import alert_rules
from console.web.admin.blueprint import bp
from console.web.admin.forms import AlertRuleForm


def _shown_threshold(row) -> float | int:
    """Rates are edited in percent on this page (the API takes fractions)."""
    value = round(row.threshold * 100 if alert_rules.spec(row).unit == "rate" else row.threshold, 4)
    return int(value) if value.is_integer() else value


def _form(row, formdata=None) -> AlertRuleForm:
    form = AlertRuleForm(formdata=formdata, prefix=f"r{row.id}", threshold=_shown_threshold(row),
                         window_s=row.window_s, enabled="1" if row.enabled else "0")
    if row.window_s is None:
        del form.window_s
    return form


def _row(row, form=None, error=None, status=200):
    html = render_template("admin/_alert_rule_row.html", row=row, rule=alert_rules.spec(row), form=form or _form(row),
                           error=error, saved=error is None, now=utcnow())
    # After a save, the page's summary ("2 firing: …") refreshes itself on this event.
    return html, status, {} if error else {"HX-Trigger": "rules-changed"}


def _page(errors: dict | None = None, status: int = 200):
    """Render the page; `errors` maps a rule key to (its submitted form, the error to show)."""
    errors = errors or {}
    rows = [(row, alert_rules.spec(row), *errors.get(row.key, (_form(row), None))) for row in alert_rules.all_rules()]
    return render_template("admin/alert_rules.html", rows=rows, now=utcnow()), status


def _in_form_terms(form: AlertRuleForm, error: ServiceError) -> str:
    """Say a service's refusal as the form's own errors read: "Window, seconds: …", not the API's "window_s …"."""
    if error.field not in form:
        return error.detail
    return f"{form[error.field].label.text}: {error.detail.removeprefix(f'{error.field} is ')}"


@bp.get("/alert-rules")
@requires(ADMIN)
@every_tenants_view("Alert rules show every tenant's figures")
def alert_rules_index():
    return _page()


@bp.post("/alert-rules/<key>")
@requires(ADMIN)
@shared_by_all_tenants("Alert rules")
def update_alert_rule(key: str):
    row = alert_rules.get(key)
    rule = alert_rules.spec(row)
    form = AlertRuleForm(prefix=f"r{row.id}")
    if row.window_s is None:
        del form.window_s
    error, status = None, 200
    valid = form.validate_on_submit()
    if valid and rule.unit == "rate" and not 0 <= form.threshold.data <= 100:
        # The form speaks percent (the service, and the API, take a fraction): say it in the form's terms.
        error, status = "Threshold: a percentage from 0 to 100, e.g. 15 for 15 %", 422
    elif valid:
        changes = {"threshold": form.threshold.data / 100 if rule.unit == "rate" else form.threshold.data,
                   "enabled": form.enabled.data == "1"}
        if "window_s" in form:
            changes["window_s"] = form.window_s.data
        try:
            alert_rules.update_rule(key, changes, current_actor())
        except ServiceError as exc:
            error, status = _in_form_terms(form, exc), exc.status
    else:
        error = "; ".join(f"{form[name].label.text}: {', '.join(messages)}" for name, messages in form.errors.items()
                          if name in form) or "the form expired; reload the page and try again"
        status = 422
    if htmx:
        return _row(row, form if error else None, error=error, status=status)
    if error:
        return _page({key: (form, error)}, status)
    flash(f"Saved {rule.title}.", "success")
    return redirect(url_for("admin.alert_rules_index"), 303)
