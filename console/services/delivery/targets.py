"""Where each channel sends: REBOUND_* settings, overridden per field by what an admin saved in the console."""

from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import parse_qsl, urlsplit

from sqlalchemy import select, update

from console.db import locks
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.secrets import CHANGED, MASK
from console.extensions import db
from console.models import ChannelSetting
from console.services import sealing
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict, InvalidInput, NotFound
from console.services.settings import setting


@dataclass(frozen=True)
class Spec:
    name: str
    label: str
    url_setting: str
    secret_setting: str | None
    secret_label: str | None
    secret_required: bool
    purpose: str
    test_noun: str  # what its test button sends
    test_effect: str  # what that test does on the other side, said before the button is pressed


SPECS = {spec.name: spec for spec in (
    Spec("slack", "Slack", "SLACK_WEBHOOK_URL", None, None, False,
         "Incoming webhook: every alert, SLA breaches and escalations, with a link back to the console.",
         "test alert", "Posts a message saying it is a test; no action needed."),
    Spec("pagerduty", "PagerDuty", "PAGERDUTY_URL", "PAGERDUTY_ROUTING_KEY", "Routing key", True,
         "Events API v2: dead letters, breakers and escalations trigger an incident; closing the work order "
         "resolves it.",
         "test alert", "Triggers a real PagerDuty incident of severity info, titled as a test; resolve it there."),
    Spec("webhook", "Alert webhook", "ALERT_WEBHOOK_URL", "ALERT_WEBHOOK_SECRET", "HMAC secret", False,
         "POST {url}/notifications/retry-alert and /notifications/sla-breach, signed with X-Rebound-Signature.",
         "test alert", "Posts an alert with event \"test\" to /notifications/retry-alert, signed if a secret is set."),
    Spec("workorder", "Work-order system", "WORKORDER_URL", "WORKORDER_SECRET", "HMAC secret", False,
         "POST {url}/ops/workorders for every new work order, signed with X-Rebound-Signature; the returned id is "
         "kept as its external id.",
         "test work order", "Posts a work order marked \"test\": true (Idempotency-Key rebound-test-…), signed if a "
         "secret is set; your work-order system should answer it without opening a ticket."),
)}
# A channel named mid-sentence ("told PagerDuty and the alert webhook"; it said "delivered to workorder").
SPOKEN = {"slack": "Slack", "pagerduty": "PagerDuty", "webhook": "the alert webhook",
          "workorder": "the work-order system"}
ENV_NAMES = {"SLACK_WEBHOOK_URL": "REBOUND_SLACK_WEBHOOK_URL", "PAGERDUTY_URL": "REBOUND_PAGERDUTY_URL",
             "PAGERDUTY_ROUTING_KEY": "REBOUND_PAGERDUTY_ROUTING_KEY", "ALERT_WEBHOOK_URL": "REBOUND_ALERT_WEBHOOK_URL",
             "ALERT_WEBHOOK_SECRET": "REBOUND_ALERT_WEBHOOK_SECRET", "WORKORDER_URL": "REBOUND_WORKORDER_URL",
             "WORKORDER_SECRET": "REBOUND_WORKORDER_SECRET"}


def mask_url(url: str) -> str:
    """Show a URL as its scheme, host and the last 4 characters: the rest of a webhook URL is its secret."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a bad port or an unclosed [IPv6 (from the environment: the form refuses them)
        return "(not a URL Rebound can use)"
    host = parts.hostname or "?"
    if port:
        host = f"{host}:{port}"
    path = parts.path.lstrip("/")
    if parts.query:
        # A query is where a short token sits (`?token=T`): none of it is shown, its tail would be the whole token.
        return f"{parts.scheme}://{host}/…{path[-4:] if len(path) >= 8 else ''}?…"
    if not path:
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}/…{path[-4:]}" if len(path) > 4 else f"{parts.scheme}://{host}/…"


def mask_secret(secret: str) -> str:
    """Show that a secret is set, and its last 4 characters only when it is long enough to keep the rest safe."""
    if not secret:
        return ""
    return f"…{secret[-4:]}" if len(secret) >= 16 else "set"


@dataclass(frozen=True)
class Target:
    """One channel's effective settings."""

    spec: Spec
    url: str
    secret: str = field(repr=False)
    enabled: bool
    url_source: str  # "console", "env" or ""
    secret_source: str
    updated_at: datetime | None = None
    updated_by: str = ""
    # The saved secret is sealed with a secret key no longer in force: nothing is sent until it is entered again.
    secret_unreadable: bool = False
    # The saved secret is plaintext from before sealing: `rebound channels reseal` or a save seals it.
    secret_unsealed: bool = False
    # The same of a saved URL (a Slack webhook's URL is its credential, so every saved URL is sealed).
    url_unreadable: bool = False
    url_unsealed: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def configured(self) -> bool:
        return bool(self.enabled and self.url and not self.secret_unreadable and not self.url_unreadable
                     and (self.secret or not self.spec.secret_required))

    @property
    def masked_url(self) -> str:
        return mask_url(self.url)

    @property
    def masked_secret(self) -> str:
        return "unreadable" if self.secret_unreadable else mask_secret(self.secret)

    @property
    def missing(self) -> str:
        """Say what keeps the channel from sending, or ''."""
        if not self.enabled:
            return "turned off in the console"
        if self.url_unreadable:
            return "the saved URL is unreadable (the secret key changed): enter it again, or forget it"
        if not self.url:
            return f"no URL: set {ENV_NAMES[self.spec.url_setting]} or save one here"
        if self.secret_unreadable:
            return (f"the saved {self.spec.secret_label.lower()} is unreadable (the secret key changed): enter it "
                    "again, or forget it")
        if self.spec.secret_required and not self.secret:
            return f"no {self.spec.secret_label.lower()}: set {ENV_NAMES[self.spec.secret_setting]} or save one here"
        return ""

    def secrets(self) -> tuple[str, ...]:
        """Return the strings that must never appear in a log line or on a page."""
        values = [self.secret, self.url]
        parts = urlsplit(self.url) if self.url else None
        if parts and len(parts.path) > 1:
            values.append(parts.path)
        if parts and parts.query:  # ?key=…: a receiver repeating the URL it was sent to put it on pages (helper 127)
            values += [parts.query, *(value for _, value in parse_qsl(parts.query) if len(value) >= 4)]
        return tuple(value for value in values if value)


def _pick(saved: str | None, configured: str) -> tuple[str, str]:
    if saved:
        return saved, "console"
    return configured, "env" if configured else ""


def _open(stored: str | None) -> tuple[str | None, bool]:
    """Return a saved secret in plaintext (or None), and whether it could not be opened."""
    if not stored:
        return None, False
    try:
        return sealing.open_sealed(stored), False
    except sealing.Unreadable:
        return None, True


def _unsealed(stored: str | None) -> bool:
    return bool(stored) and not sealing.is_sealed(stored)


def all_targets() -> dict[str, Target]:
    """Return every channel's effective settings (one query); saved secrets are opened here, in memory only."""
    saved = {row.name: row for row in db.session.execute(select(ChannelSetting)).scalars()}
    found = {}
    for name, spec in SPECS.items():
        row = saved.get(name)
        # An unreadable saved value still wins over the env: sending elsewhere, or signing with another key, would
        # be a silent change.
        saved_url, url_unreadable = _open(row.url if row else None)
        url, url_source = ("", "console") if url_unreadable else _pick(saved_url, setting(spec.url_setting) or "")
        saved_secret, unreadable = _open(row.secret if row else None)
        secret, secret_source = ("", "console") if unreadable else _pick(
            saved_secret, setting(spec.secret_setting) or "" if spec.secret_setting else "")
        found[name] = Target(spec, url.rstrip("/") if name in ("webhook", "workorder") else url, secret,
                             row.enabled if row else True, url_source, secret_source,
                             row.updated_at if row else None, row.updated_by if row else "", unreadable,
                             _unsealed(row and row.secret), url_unreadable, _unsealed(row and row.url))
    return found


def get(name: str) -> Target:
    """Return one channel's effective settings, or raise NotFound."""
    if name not in SPECS:
        raise NotFound(f"no channel named {name!r}; channels are {', '.join(SPECS)}")
    return all_targets()[name]


def _check_url(url: str) -> str:
    url = url.strip()
    if not url:
        return ""
    if len(url) > 500:
        raise InvalidInput("keep the URL under 500 characters", "url")
    if any(character <= " " or character == "\x7f" for character in url):
        raise InvalidInput("a URL has no spaces, line breaks or other control characters; write a space as %20",
                           "url")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading it is the check: past 65535, or not a number, it raises
    except ValueError as error:
        raise InvalidInput(f"give a full http:// or https:// URL ({error})", "url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput("give a full http:// or https:// URL", "url")
    return url


def save(name: str, actor: Actor, *, url: str = "", secret: str = "", enabled: bool = True,
         forget_url: bool = False, forget_secret: bool = False, clock: Clock = SYSTEM_CLOCK) -> Target:
    """Save a channel's console settings: a blank field keeps what was saved; 'forget' falls back to the env."""
    locks.hold(f"channel:{name}")  # by name, as the row may not exist yet: "before" is what this save replaces
    before = get(name)
    url = _check_url(url)
    if url and forget_url:
        raise InvalidInput("either type a new URL or tick Forget the saved URL, not both", "url")
    secret = secret.strip()
    if len(secret) > 500:
        raise InvalidInput("keep the secret under 500 characters", "secret")
    if secret and before.spec.secret_setting is None:
        raise InvalidInput(f"{before.spec.label} takes no secret", "secret")
    if secret and forget_secret:
        raise InvalidInput(f"either type a new {before.spec.secret_label.lower()} or tick Forget, not both", "secret")
    row = db.session.get(ChannelSetting, name) or ChannelSetting(name=name, enabled=True)
    db.session.add(row)
    if forget_url:
        row.url = None
    elif url:
        row.url = sealing.seal(url)
    if forget_secret:
        row.secret = None
    elif secret:
        row.secret = sealing.seal(secret)
    row.enabled = enabled
    row.updated_at, row.updated_by = clock(), actor.name
    db.session.flush()
    after = all_targets()[name]
    if (after.url, after.url_source, after.secret, after.enabled) == (
            before.url, before.url_source, before.secret, before.enabled):
        db.session.rollback()  # nothing changed: no audit row whose before and after read the same (helper 156)
        return before
    said_before, said_after = _describe(before), _describe(after, changed=after.secret != before.secret)
    if after.url != before.url and said_after["url"] == said_before["url"]:  # masked alike: said it is another
        said_after["url"] = f"{said_after['url']} (changed)"
    audit.record(db.session, actor, "channel.update", "channel", name, before=said_before, after=said_after,
                 clock=clock)
    db.session.commit()
    return after


def _describe(target: Target, changed: bool = False) -> dict:
    """Describe a channel for the audit log: whether its secret is set, and changed, never a character of it (its
    last four were kept for good in the chain; helper 156)."""
    secret = (CHANGED if changed else MASK) if target.secret else ""
    return {"url": target.masked_url, "url_source": target.url_source, "secret": secret, "enabled": target.enabled}


def reseal_all(actor: Actor, clock: Clock = SYSTEM_CLOCK) -> dict[str, list[str]]:
    """Seal saved URLs and secrets that are plaintext or sealed with a fallback key with the current key; list what
    was done, each as "<channel> <what>" (e.g. "slack URL")."""
    done = {"resealed": [], "unreadable": [], "current": []}
    rows = db.session.execute(select(ChannelSetting.name, ChannelSetting.url, ChannelSetting.secret)).all()
    values = [(f"{row.name} {'URL' if column == 'url' else _secret_label(row.name)}", column, row.name, stored)
              for row in rows for column, stored in (("url", row.url), ("secret", row.secret)) if stored]
    sealed = [(what, stored) for what, _, _, stored in values if sealing.is_sealed(stored)]
    if sealed and all(_open(stored)[1] for _, stored in sealed):
        # A wrong REBOUND_SECRET_KEY (a walk ran it with one): sealing the plaintext values with it would lock them
        # away as well.
        raise Conflict(f"no saved value opens with the secret key in force (REBOUND_SECRET_KEY and its fallbacks; "
                       f"unreadable: {', '.join(what for what, _ in sealed)}): is it the key the console runs with? "
                       "Nothing was sealed")
    for what, column, name, stored in values:
        done[_reseal(name, column, stored, actor, clock)].append(what)
    db.session.commit()
    return done


def _secret_label(name: str) -> str:
    spec = SPECS.get(name)  # a row of a channel this version no longer has is resealed all the same
    return spec.secret_label if spec and spec.secret_label else "secret"


def _reseal(name: str, column: str, stored: str, actor: Actor, clock: Clock) -> str:
    try:
        sealed = sealing.reseal(stored)
    except sealing.Unreadable:
        return "unreadable"
    if sealed is None:
        return "current"
    # Only if nobody saved another value meanwhile: theirs is sealed already and must not be overwritten.
    field = getattr(ChannelSetting, column)
    changed = db.session.execute(update(ChannelSetting).where(ChannelSetting.name == name, field == stored)
                                 .values({column: sealed}).execution_options(synchronize_session=False)).rowcount
    if changed:
        audit.record(db.session, actor, "channel.reseal", "channel", name,
                     before={column: "older key" if sealing.is_sealed(stored) else "plaintext"},
                     after={column: "sealed"}, clock=clock)
    return "resealed" if changed else "current"
