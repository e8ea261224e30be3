"""Admin → Channels: where alerts and work orders go, how the last delivery went, a test button, and settings."""

from flask import flash, redirect, render_template, url_for

from console.auth import current_actor, every_tenants_view, requires, shared_by_all_tenants
from console.domain.clock import utcnow
from console.domain.figures import duration
from console.domain.words import listed
from console.services.delivery import channel_report, manual, targets
from console.services.errors import ServiceError
from console.services.people.permissions import ADMIN
from console.services.settings import setting
from console.web.admin.blueprint import bp
from console.web.admin.forms import ChannelForm

ROUTES = [
    ("Dead letters, retry limit reached, a breaker's own opening, queue overflow, other alert rules",
     "Slack · PagerDuty · webhook /notifications/retry-alert"),
    # As dispatch's "no-page" route sends it: the page said PagerDuty too (helper 108).
    ("The breaker_opened rule (each breaker's own alert already pages)", "Slack · webhook /notifications/retry-alert"),
    ("SLA breach", "webhook /notifications/sla-breach · Slack"),
    ("3 SLA breaches in a row (manager escalation)", "PagerDuty (critical) · Slack"),
    ("New work order", "work-order system POST /ops/workorders"),
    ("Work order acknowledged", "PagerDuty acknowledge · webhook (\"action\": \"acknowledge\"); no Slack note"),
    ("Work order closed (and every resolve)",
     "PagerDuty resolve · Slack · webhook (\"action\": \"resolve\"); the work-order system is not told"),
    ("Delivery failed for good (e.g. work order creation failed)", "the default channels, minus the one that failed"),
]


def _timing() -> dict:
    """The repeat window and the retry waits as this deployment sets them (the page said 5 minutes and 2, 4, 8, 16 s
    whatever REBOUND_ALERT_REPEAT_S and REBOUND_DELIVERY_* said)."""
    attempts, backoff = int(setting("DELIVERY_ATTEMPTS")), float(setting("DELIVERY_BACKOFF_S"))
    repeat_s = float(setting("ALERT_REPEAT_S"))
    return {"repeat_s": repeat_s, "repeat": duration(repeat_s), "attempts": attempts,
            "waits": listed([duration(backoff * 2 ** n) for n in range(max(0, attempts - 1))])}


def _form(target: targets.Target) -> ChannelForm:
    form = ChannelForm(prefix=target.name, enabled="1" if target.enabled else "0")
    # A saved URL or secret is never sent back to the browser: the page shows them masked only.
    form.url.data, form.secret.data = "", ""
    return form


def _page(failed: tuple[str, ChannelForm] | None = None, status: int = 200):
    """Render the page; `failed` is a refused channel form, shown open with what was typed and its errors."""
    now = utcnow()
    states = channel_report.channels()
    forms = {state.target.name: _form(state.target) for state in states}
    if failed:
        name, form = failed
        # The refused URL is the person's own, sent back to be corrected (the page is no-store); a secret never is.
        form.secret.data = ""
        forms[name] = form
    return render_template("admin/channels.html", states=states, forms=forms, routes=ROUTES, now=now, timing=_timing(),
                           backlog=channel_report.backlog(now), latency=channel_report.latency(now),
                           failures=channel_report.recent_failures(), failed=failed), status


@bp.get("/channels")
@requires(ADMIN)
@every_tenants_view("Alert channels show every tenant's deliveries")
def channels_index():
    return _page()


@bp.post("/channels/<name>/test")
@requires(ADMIN)
@shared_by_all_tenants("Alert channels")
def test_channel(name: str):
    spec = targets.get(name).spec
    label, noun = spec.label, spec.test_noun.capitalize()
    try:
        _, attempt = manual.send_test(name, current_actor())
    except ServiceError as error:
        flash(error.detail, "error")
        return redirect(url_for("admin.channels_index"), 303)
    if attempt is None:
        flash(f"{noun} to {label} queued; the deliverer sends it within seconds.", "info")
    elif attempt.outcome == "sent":
        flash(f"{noun} delivered to {label}: HTTP {attempt.status_code} in {attempt.duration_ms} ms.", "success")
    else:
        flash(f"{noun} to {label} failed: {attempt.error}", "error")
    return redirect(url_for("admin.channels_index"), 303)


@bp.post("/channels/<name>")
@requires(ADMIN)
@shared_by_all_tenants("Alert channels")
def update_channel(name: str):
    target = targets.get(name)
    form = ChannelForm(prefix=name)
    if not form.validate_on_submit():
        return _page((name, form), 422)
    try:
        saved = targets.save(name, current_actor(), url=form.url.data or "", secret=form.secret.data or "",
                             enabled=form.enabled.data == "1", forget_url=form.forget_url.data,
                             forget_secret=form.forget_secret.data)
    except ServiceError as error:
        form.attach(error)
        return _page((name, form), error.status)
    state = "configured" if saved.configured else f"not sending: {saved.missing}"
    flash(f"Saved {target.spec.label} ({state}).", "success")
    return redirect(url_for("admin.channels_index"), 303)


@bp.post("/channels/messages/<int:message_id>/redeliver")
@requires(ADMIN)
@shared_by_all_tenants("Alert channels")
def redeliver_message(message_id: int):
    try:
        manual.redeliver(message_id, current_actor())
    except ServiceError as error:
        flash(error.detail, "error")
    else:
        flash(f"Message {message_id} is queued again; it goes out within seconds.", "success")
    return redirect(url_for("admin.channels_index"), 303)
