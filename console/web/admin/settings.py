"""Admin → Settings: values an admin sets for everyone (how many dead letters one person may discard at once)."""

from flask import flash, redirect, render_template, url_for

from console.auth import current_actor, requires, shared_by_all_tenants
from console.services.errors import ServiceError
from console.services.people.permissions import ADMIN
from console.services.system import console_settings
from console.web.admin.blueprint import bp
from console.web.admin.forms import SettingForm


def _page(failed: tuple[str, SettingForm] | None = None, status: int = 200):
    current = console_settings.all_settings()
    forms = {c.setting.key: failed[1] if failed and failed[0] == c.setting.key else SettingForm(value=str(c.value))
             for c in current}
    return render_template("admin/settings.html", current=current, forms=forms), status


@bp.get("/settings")
@requires(ADMIN)
def settings_index():
    return _page()


@bp.post("/settings/<key>")
@requires(ADMIN)
@shared_by_all_tenants("Console settings")
def update_setting(key: str):
    setting = console_settings.SETTINGS.get(key)
    form = SettingForm()
    if setting is None or not form.validate_on_submit():
        return _page((key, form), 404 if setting is None else 422)
    try:
        value = console_settings.save(key, form.value.data, current_actor())
    except ServiceError as error:
        form.value.errors = [*form.value.errors, error.detail]
        return _page((key, form), error.status)
    flash(f"Saved: {setting.title.lower()} is {value}.", "success")
    return redirect(url_for("admin.settings_index"), 303)
