"""Alert rules, evaluated every minute: each fires (an alert) past its threshold and clears (a resolve) below it.

A rule's definition (what it measures) is code; its threshold, window, on/off switch and state are rows in
alert_rules, edited by admins. Firing writes an outbox alert with the dedup key `rule:<key>`; clearing
writes a `resolve` row with the same key, so the delivery side resolves the same PagerDuty incident.
"""

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value

from console.db import locks
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.figures import duration
from console.extensions import db
from console.models import AlertRule, OutboxMessage
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.delivery import dispatch, outbox
from console.services.errors import InvalidInput, NotFound
from console.services.system import alert_measures
from console.services.system.alert_measures import LATE_START_S, MIN_EVENTS, Measure

log = logging.getLogger("rebound.alerts")
MIN_WINDOW_S, MAX_WINDOW_S = 60, 86_400


@dataclass(frozen=True)
class Rule:
    key: str
    title: str
    description: str
    threshold: float
    window_s: int | None
    unit: str  # rate (a fraction, shown as %) | count | multiple (of a usual value, shown as 3×) | seconds
    severity: str
    measure: Callable[[datetime, int | None], Measure]
    channel: str = "default"  # its alert's route (delivery/dispatch.py ROUTES)

    def show(self, value: float | None) -> str:
        """Format a value or threshold of this rule for people."""
        if value is None:
            return "—"
        if self.unit == "rate":
            return f"{value * 100:.1f}%".replace(".0%", "%")
        if self.unit == "multiple":
            return f"{value:.1f}×".replace(".0×", "×")
        if self.unit == "seconds":
            return duration(value)
        # "g" wrote a threshold of a billion as 1e+09 (helper 108): counts read with their thousands.
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}".rstrip("0").rstrip(".")


RULES: dict[str, Rule] = {rule.key: rule for rule in (
    Rule("retry_failure_rate", "Retry failure rate high",
         f"Share of attempts that failed (of those that ended, at least {MIN_EVENTS}) over the window.",
         0.15, 600, "rate", "error", alert_measures.retry_failure_rate),
    Rule("dlq_length", "Dead-letter queue long", "Open dead letters, now.", 100, None, "count", "error",
         alert_measures.dlq_length),
    Rule("queue_wait", "Jobs waiting long: workers down or too few",
         "How long the oldest job in a queue the workers serve has waited, now. Every worker stopped, frozen or "
         "busy for long looks like this.", 300, None, "seconds", "critical", alert_measures.queue_wait),
    Rule("scheduling_failure_rate", "Scheduling failure rate high",
         f"Task runs that started over {LATE_START_S} s after their scheduled time (or not at all), plus missed "
         f"firings, over those due in the window (at least {MIN_EVENTS}).",
         0.05, 300, "rate", "warning", alert_measures.scheduling_failure_rate),
    Rule("sla_consecutive_breaches", "SLA breached three runs in a row",
         "Tasks escalated to the manager for three consecutive SLA breaches in the window.",
         0, 3600, "count", "critical", alert_measures.sla_escalations),
    Rule("queue_overflow", "Queue overflow", "Submissions refused with 429 because a queue or quota was full.",
         0, 300, "count", "warning", alert_measures.queue_overflow),
    Rule("retry_limit_reached", "Retry limit reached",
         "Runs that used up their retries in the window and still wait in the dead-letter queue.",
         0, 3600, "count", "error", alert_measures.retry_limit_reached),
    Rule("workorder_failed", "Work-order creation failed",
         "Work orders the work-order system refused for good, until someone sends them again or their work order "
         "closes. While this rule is on it is their one page; switched off, each raises a \"delivery failed\" alert.",
         0, None, "count", "error", alert_measures.workorder_failed),
    Rule("breaker_opened", "Circuit breaker opened", "Times a handler's circuit breaker opened in the window.",
         0, 600, "count", "error", alert_measures.breaker_opened, channel="no-page"),
    Rule("lock_contention", "Lock contention high: consider scaling out",
         f"Share of the planner lock's requests or the leader lock's renewals that found it taken (the worse, of "
         f"{MIN_EVENTS} or more) over the window. High: scale out (busy tenants on their own deployment) and "
         f"spread schedules off the same minute.",
         0.7, 600, "rate", "warning", alert_measures.lock_contention),
    Rule("progress_write_failure_rate", "Progress write-back failure rate high",
         f"Share of handlers' progress writes and workers' heartbeats that failed to reach the database "
         f"(at least {MIN_EVENTS} writes) over the window.",
         0.01, 600, "rate", "error", alert_measures.progress_write_failure_rate),
    Rule("timeout_anomaly", "Timeouts well above usual",
         f"A handler's timeouts in the window as a multiple of its usual count for that long (its rate over the 7 "
         f"days before, at least 1); only handlers with {alert_measures.MIN_TIMEOUTS} timeouts or more in the window.",
         3, 3600, "multiple", "warning", alert_measures.timeout_anomaly),
)}


def ensure_defaults() -> None:
    """Add the rules this version knows and the database lacks (idempotent; every process calls it)."""
    known = {rule.key: rule for rule in db.session.execute(select(AlertRule)).scalars()}
    for spec in RULES.values():
        row = known.get(spec.key)
        if row is None:
            db.session.add(AlertRule(key=spec.key, description=spec.description, threshold=spec.threshold,
                                     window_s=spec.window_s, enabled=True, state="ok"))
        elif row.description != spec.description:
            row.description = spec.description
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()  # another process seeded them at the same moment


def all_rules() -> list[AlertRule]:
    """Return every rule this version knows, in the order they are defined."""
    rows = {row.key: row for row in db.session.execute(select(AlertRule)).scalars()}
    return [rows[key] for key in RULES if key in rows]


def firing() -> list[AlertRule]:
    """Return the enabled rules firing now, in the order they are defined (for everyone's Overview)."""
    return [row for row in all_rules() if row.enabled and row.state == "firing"]


def get(key: str) -> AlertRule:
    """Return the rule with this key or raise NotFound."""
    row = db.session.execute(select(AlertRule).where(AlertRule.key == key)).scalar_one_or_none()
    if row is None or key not in RULES:
        raise NotFound(f"no alert rule {key!r}; the rules are {', '.join(RULES)}")
    return row


def spec(row: AlertRule) -> Rule:
    return RULES[row.key]


def as_dict(row: AlertRule) -> dict:
    """Return a rule as the API shows it."""
    rule = RULES[row.key]
    return {"key": row.key, "title": rule.title, "description": row.description, "unit": rule.unit,
            "threshold": row.threshold, "window_s": row.window_s, "windowed": rule.window_s is not None,
            "enabled": row.enabled, "state": row.state, "last_value": row.last_value, "detail": row.detail,
            "changed_at": _iso(row.changed_at), "evaluated_at": _iso(row.evaluated_at)}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def evaluate(clock: Clock = SYSTEM_CLOCK) -> dict[str, str]:
    """Measure every enabled rule, fire or clear it; return {key: new state} of the rules that changed."""
    now = clock()
    changed = {}
    for row in all_rules():
        if not row.enabled:
            continue
        rule = RULES[row.key]
        try:
            measure = rule.measure(now, row.window_s)
        except Exception:  # noqa: BLE001 - one broken measure must not silence the other rules
            db.session.rollback()
            log.exception("alert rule %s could not be measured", row.key)
            continue
        row.last_value = float(measure.value) if measure.enough else None
        row.detail = (measure.detail if measure.enough else f"{measure.detail}: too few to judge (a rate needs "
                      f"{MIN_EVENTS}){'; it stays firing until there are' if row.state == 'firing' else ''}")[:255]
        row.evaluated_at = now
        # Too few to judge keeps the state: a firing rule whose events stopped (every worker down) is not resolved.
        breached = measure.value > row.threshold if measure.enough else row.state == "firing"
        if breached != (row.state == "firing") and _switch(row, "firing" if breached else "ok", now, measure):
            changed[row.key] = row.state
        elif row.state == "firing":
            _tell_new_channels(row, now)
        db.session.commit()
    return changed


def _switch(row: AlertRule, state: str, now: datetime, measure: Measure | None) -> bool:
    """Flip the rule's state if no one else did first, and write the alert (or its resolve) with it."""
    won = db.session.execute(update(AlertRule).where(AlertRule.id == row.id, AlertRule.state == row.state)
                             .values(state=state, changed_at=now).execution_options(synchronize_session=False))
    if won.rowcount != 1:
        return False
    set_committed_value(row, "state", state)
    set_committed_value(row, "changed_at", now)
    rule = RULES[row.key]
    firing = state == "firing"
    window = f" in the last {_duration(row.window_s)}" if row.window_s else ""
    if measure is None:
        summary = "The rule was switched off; it is no longer watched."
    else:
        lead = "" if firing else "Back under the threshold: "
        summary = f"{lead}{measure.detail}{window} ({rule.show(measure.value)}; threshold {rule.show(row.threshold)})."
    payload = {"rule": row.key, "alert_rule": row.key, "state": "firing" if firing else "resolved",
               "title": rule.title if firing else f"Resolved: {rule.title}", "summary": summary,
               "severity": rule.severity if firing else "info", "value": measure.value if measure else None,
               "threshold": row.threshold, "window_s": row.window_s, "at": now.isoformat()}
    kind, key = ("alert" if firing else "resolve"), f"rule:{row.key}"
    if outbox.add(kind, key, payload, now, channel=rule.channel) is None:
        # Merged into a message not sent yet: the latest state wins, trigger or resolve.
        db.session.execute(update(OutboxMessage).where(OutboxMessage.dedup_key == key,
                                                       OutboxMessage.status == "pending").values(kind=kind))
    log.warning("alert rule %s %s: %s", row.key, "fired" if firing else "cleared", summary)
    return True


def _tell_new_channels(row: AlertRule, now: datetime) -> None:
    """Send a firing rule's alert again once a channel for it is configured, when it went nowhere (none was when it
    fired): on a fresh install a rule firing before the channels were set up stayed silent until it cleared and fired
    again (helper 154)."""
    key = f"rule:{row.key}"
    last = db.session.execute(select(OutboxMessage).where(OutboxMessage.dedup_key == key)
                              .order_by(OutboxMessage.id.desc()).limit(1)).scalar_one_or_none()
    if (last is None or last.kind != "alert" or last.status != "skipped"
            or not (last.last_error or "").startswith(dispatch.NO_CHANNEL) or not dispatch.configured_routes(last)):
        return
    since = row.changed_at or last.created_at
    outbox.add("alert", key, {**last.payload, "summary": f"{last.payload.get('summary', '')} Firing since "
                              f"{since:%Y-%m-%d %H:%M} UTC; told now, as no channel was configured then."},
               now, channel=last.channel)


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def update_rule(key: str, changes: dict, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> AlertRule:
    """Change a rule's threshold, window or switch (audited); switching off a firing rule resolves its alert."""
    row = locks.fresh_row(AlertRule, get(key).id)
    rule = RULES[key]
    for name in changes:
        if name not in ("threshold", "window_s", "enabled"):
            raise InvalidInput(f"unknown field {name!r}; a rule takes threshold, window_s and enabled", name)
    values = {}
    if "threshold" in changes:
        values["threshold"] = _threshold(rule, changes["threshold"])
    if "window_s" in changes:
        values["window_s"] = _window(rule, changes["window_s"])
    if "enabled" in changes:
        if not isinstance(changes["enabled"], bool):
            raise InvalidInput("enabled is true or false", "enabled")
        values["enabled"] = changes["enabled"]
    before = {name: getattr(row, name) for name in values}
    values = {name: value for name, value in values.items() if before[name] != value}
    if not values:
        return row
    now = clock()
    for name, value in values.items():
        setattr(row, name, value)
    if values.get("enabled") is False:
        # Its last measure goes too: switched on again, it read "— / None · 39 s ago" until the next minute's check.
        row.last_value = row.detail = row.evaluated_at = None
        if row.state == "firing":
            _switch(row, "ok", now, None)
    audit.record(db.session, actor, "alert_rule.update", "alert_rule", key,
                 before={name: before[name] for name in values}, after=values, clock=clock)
    db.session.commit()
    return row


MAX_THRESHOLD = 1_000_000_000


def _threshold(rule: Rule, value) -> float:
    # An int is never infinite, and math.isfinite() cannot take one too large for a float (a 400-digit one).
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or (isinstance(value, float) and not math.isfinite(value)) or value < 0):
        raise InvalidInput("threshold is a number of at least 0", "threshold")
    if rule.unit == "rate" and value > 1:
        raise InvalidInput("threshold is a fraction from 0 to 1 for a rate (0.15 is 15%)", "threshold")
    if rule.unit == "multiple" and value < 1:  # under 1 it would fire at fewer timeouts than usual
        raise InvalidInput("threshold is a multiple of the usual count of at least 1 (3 fires at three times it)",
                           "threshold")
    if rule.unit in ("count", "seconds") and isinstance(value, float) and not value.is_integer():
        raise InvalidInput(f"threshold is a whole number for a {'count' if rule.unit == 'count' else 'wait'}",
                           "threshold")
    if value > MAX_THRESHOLD:  # a float past 2**53 no longer holds the whole number typed, and no alert could fire
        raise InvalidInput(f"threshold is at most {MAX_THRESHOLD:,}", "threshold")
    return float(value)


def _window(rule: Rule, value) -> int | None:
    if rule.window_s is None:
        if value is None:
            return None
        raise InvalidInput(f"{rule.key} looks at the present only; it has no window", "window_s")
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_WINDOW_S <= value <= MAX_WINDOW_S:
        raise InvalidInput(f"window_s is a whole number of seconds from {MIN_WINDOW_S} to {MAX_WINDOW_S}",
                           "window_s")
    return value
