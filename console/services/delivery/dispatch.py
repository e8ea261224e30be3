"""Deliver outbox rows: claim one, send it to its channels, then mark it delivered, retry it later, or fail it."""

import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, func, literal, select, update
from sqlalchemy.exc import IntegrityError

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Delivery, OutboxMessage, WorkOrder
from console.services.delivery import http, losses, notice, pagerduty, silence, slack, targets, webhook, workorder
from console.services.delivery.closed_orders import closed_before_sent
from console.services.settings import setting

log = logging.getLogger("rebound.delivery")
CHANNELS = {"slack": slack, "pagerduty": pagerduty, "webhook": webhook, "workorder": workorder}
# Which channels an alert goes to, by the outbox row's channel; a channel that is not configured is left out.
ROUTES = {"default": ("slack", "pagerduty", "webhook"), "sla-breach": ("webhook", "slack"),
          # Three SLA breaches in a row: paged, and told to the webhook's SLA endpoint as the breaches were (seed
          # 001's /notifications/sla-breach is for "SLA breach alerts or work-order notices").
          "manager": ("pagerduty", "slack", "webhook"),
          # What already pages on its own incident (each breaker does): said again, but never a second page.
          "no-page": ("slack", "webhook")}
CLAIMABLE = ("pending", "sending")
NO_CHANNEL = "no channel configured for it"  # a skipped message's reason, which an alert rule still firing reads
NOT_TRIED = "not_tried"  # a delivery row for a channel this attempt did not wait on (silent since a timeout)
TICK_BUDGET_S = 20.0


@dataclass(frozen=True)
class Claim:
    message_id: int
    attempt: int


def route(message: OutboxMessage) -> list[str]:
    """Return the channels a message is meant for, before looking at which are configured."""
    if message.kind == "workorder":
        names = ("workorder",)
    elif message.kind == "resolve":  # where the alert it ends went (the work-order system takes no close)
        names = ROUTES.get(message.channel, ROUTES["default"])
    elif message.kind == "acknowledge":  # what pages, and a receiver that mirrors incidents; no chat note
        names = ("pagerduty", "webhook")
    elif message.kind == "test":
        names = (message.channel,)
    else:
        names = ROUTES.get(message.channel, ROUTES["default"])
    # A "delivery failed" alert is not sent back through the channel that failed.
    skip = set((message.payload or {}).get("skip_channels") or ())
    return [name for name in names if name not in skip]


def configured_routes(message: OutboxMessage, every: dict | None = None) -> list[str]:
    """Return the channels a message goes to: those it is meant for that are configured (none: it stays here)."""
    every = every if every is not None else targets.all_targets()
    return [name for name in route(message) if every[name].configured]


def _lease() -> timedelta:
    # Long enough for every channel of one message to time out, so a live deliverer never loses its claim.
    return timedelta(seconds=60 + 4 * float(setting("DELIVERY_TIMEOUT_S")))


def claim_next(now: datetime, message_id: int | None = None) -> Claim | None:
    """Claim the next due message (or the given one) with a conditional update; only one deliverer wins it."""
    query = (select(OutboxMessage.id, OutboxMessage.status, OutboxMessage.attempts)
             .where(OutboxMessage.status.in_(CLAIMABLE), OutboxMessage.next_attempt_at <= now)
             .order_by(OutboxMessage.next_attempt_at, OutboxMessage.id).limit(10))
    if message_id is not None:
        query = query.where(OutboxMessage.id == message_id)
    for row in db.session.execute(query).all():
        # A "sending" row is due only once its lease ran out: its deliverer died mid-send.
        won = db.session.execute(
            update(OutboxMessage)
            .where(OutboxMessage.id == row.id, OutboxMessage.status == row.status,
                   OutboxMessage.attempts == row.attempts, OutboxMessage.next_attempt_at <= now)
            .values(status="sending", attempts=row.attempts + 1, next_attempt_at=now + _lease())
            .execution_options(synchronize_session=False)).rowcount
        if won == 1:
            db.session.commit()
            return Claim(row.id, row.attempts + 1)
    db.session.rollback()
    return None


def _settle(claim: Claim, **values) -> bool:
    """Record the outcome, if this deliverer still holds the claim."""
    done = db.session.execute(
        update(OutboxMessage)
        .where(OutboxMessage.id == claim.message_id, OutboxMessage.status == "sending",
               OutboxMessage.attempts == claim.attempt)
        .values(**values).execution_options(synchronize_session=False)).rowcount
    if not done:
        log.warning("outbox %s: claim of attempt %s was taken over; outcome not recorded", claim.message_id,
                    claim.attempt)
    return done == 1


def _requeue(claim: Claim, now: datetime, **values) -> str:
    """Put a claimed message back to pending and commit; return "requeued", "merged" (folded into the pending
    message with its key) or "lost" (the claim was taken over)."""
    # While this one was claimed, outbox.add may have queued a new pending row for its key; two pending rows of
    # one key would break the unique index, so this one's occurrences join that row, which is sent in its place.
    # The add may commit between the fold and the settle: the settle's unique violation sends us round again.
    this = select(OutboxMessage.occurrences).where(OutboxMessage.id == claim.message_id).scalar_subquery()
    key = select(OutboxMessage.dedup_key).where(OutboxMessage.id == claim.message_id).scalar_subquery()
    for _ in range(3):
        try:
            folded = db.session.execute(
                update(OutboxMessage).where(OutboxMessage.dedup_key == key, OutboxMessage.status == "pending",
                                            OutboxMessage.id != claim.message_id)
                .values(occurrences=OutboxMessage.occurrences + this, **_carried(claim, values))
                .returning(OutboxMessage.id).execution_options(synchronize_session=False)).scalar_one_or_none()
            if folded is None:
                outcome = "requeued" if _settle(claim, status="pending", **values) else "lost"
            elif _settle(claim, status="skipped", next_attempt_at=now,
                         last_error=f"merged into #{folded}, queued with the same key while this one was out"):
                outcome = "merged"
            else:
                db.session.rollback()  # not ours any more: whoever holds it counts its occurrences
                return "lost"
            db.session.commit()
            return outcome
        except IntegrityError:
            db.session.rollback()
    raise RuntimeError(f"outbox {claim.message_id}: neither back to pending nor merged after 3 tries")


def _carried(claim: Claim, values: dict) -> dict:
    """Return what the pending row a claim folds into takes over from it: its attempts and the wait before the next
    (whichever is further on), and its error. Folded afresh, a failing channel was tried again at once as attempt 1
    by each death of a storm (24 POSTs in a second to a receiver answering 404, helper 143)."""
    attempts, due = values.get("attempts", claim.attempt), values.get("next_attempt_at")
    carried = {"attempts": case((OutboxMessage.attempts < attempts, attempts), else_=OutboxMessage.attempts)}
    if due is not None:
        carried["next_attempt_at"] = case((OutboxMessage.next_attempt_at < due, due),
                                          else_=OutboxMessage.next_attempt_at)
    if values.get("last_error"):
        carried["last_error"] = values["last_error"]
    return carried


def _hold(message: OutboxMessage, claim: Claim, now: datetime) -> datetime | None:
    """Hold back a repeat of an alert delivered moments ago, so a storm reaches people as few messages."""
    repeat_s = float(setting("ALERT_REPEAT_S"))
    if message.kind != "alert" or claim.attempt != 1 or repeat_s <= 0 or (message.payload or {}).get("resent_by"):
        return None  # a person's "Send again" goes now
    previous = db.session.execute(select(OutboxMessage.delivered_at, OutboxMessage.payload, OutboxMessage.kind).where(
        OutboxMessage.dedup_key == message.dedup_key, OutboxMessage.status == "delivered",
        OutboxMessage.id != message.id).order_by(OutboxMessage.delivered_at.desc(), OutboxMessage.id.desc())
        .limit(1)).first()
    last = previous.delivered_at if previous else None
    if last is None or last + timedelta(seconds=repeat_s) <= now:
        return None
    if previous.kind != "alert":
        return None  # an alert rule's resolve shares its key: firing again after it is a new incident, told at once
    if (previous.payload or {}).get("work_order_id") != (message.payload or {}).get("work_order_id"):
        return None  # a new work order (its group's last one was closed since): a new incident, told at once
    if db.session.execute(select(OutboxMessage.id).where(
            OutboxMessage.dedup_key == f"resolve:{notice.incident_key(message)}",
            OutboxMessage.created_at >= last).limit(1)).first():
        return None  # its incident was resolved since (a breaker closed, then opened again): a new one, told at once
    until = last + timedelta(seconds=repeat_s)
    outcome = _requeue(claim, now, attempts=0, next_attempt_at=until)
    # The row sent in the end is marked held, so the alert latency leaves the wait out: folded into the row queued
    # while this one was out (a storm's normal case), the hold went unmarked and read as 5 minutes late (helper 153).
    held = message.id if outcome == "requeued" else _pending_with(message.dedup_key) if outcome == "merged" else None
    if held is not None:
        db.session.add(Delivery(outbox_id=held, channel="all", attempt=0, outcome="held", at=now,
                                error=f"the same alert was delivered at {last:%H:%M:%S}; this one gathers "
                                      f"occurrences until {until:%H:%M:%S} UTC"))
        db.session.commit()
    return until


def _pending_with(dedup_key: str) -> int | None:
    """Return the pending message of this key (one at most, by a unique index), if any."""
    return db.session.execute(select(OutboxMessage.id).where(
        OutboxMessage.dedup_key == dedup_key, OutboxMessage.status == "pending")).scalar_one_or_none()


def deliver(claim: Claim, clock: Clock = SYSTEM_CLOCK, *, probe: bool = False) -> str:
    """Send one claimed message; return delivered, retrying, merged, failed, skipped or held.

    A channel silent since it last gave no answer (delivery/silence.py) is not tried, unless `probe` (a test sent
    from its page tries it anyway)."""
    try:
        return _deliver(claim, clock, probe)
    except Exception as error:
        # A message that cannot even be formatted is retried, then failed, like one that cannot be sent.
        log.exception("outbox %s: delivery attempt %s broke", claim.message_id, claim.attempt)
        db.session.rollback()
        return _after(claim, clock(), {"rebound": f"{type(error).__name__} while delivering"}, None)


def _deliver(claim: Claim, clock: Clock, probe: bool) -> str:
    now = clock()
    message = db.session.get(OutboxMessage, claim.message_id)
    if _hold(message, claim, now):
        return "held"
    closed = closed_before_sent(message)
    if reason := losses.overtaken(message) or (closed and f"not sent: {closed}"):
        _settle(claim, status="skipped", next_attempt_at=now, last_error=reason)
        db.session.commit()
        return "skipped"
    every = targets.all_targets()
    wanted = route(message)
    names = configured_routes(message, every)
    if not names:
        _settle(claim, status="skipped", next_attempt_at=now,
                last_error=f"{NO_CHANNEL} ({', '.join(wanted) or 'none'})")
        db.session.commit()
        return "skipped"
    sent_before = set(db.session.execute(select(Delivery.channel).where(
        Delivery.outbox_id == message.id, Delivery.outcome == "sent")).scalars())
    text = notice.build(message)
    snapshot = {"kind": message.kind, "payload": dict(message.payload or {}), "created_at": message.created_at,
                "tenant_id": message.tenant_id, "title": text.title}
    db.session.commit()  # no transaction stays open while we wait on the network
    due = [name for name in names if name not in sent_before]
    # A person's "Send again" asks a silent channel at once, as a test from its page does: they likely just fixed it.
    probe = probe or (claim.attempt == 1 and bool(snapshot["payload"].get("resent_by")))
    on_record = silence.read(due)  # one round trip; a silence that ended by our clock is still there to end
    silent = {} if probe else {name: what for name, (until, what) in on_record.items() if until > now}
    results = _post_each({name: (CHANNELS[name].request(text, every[name]), every[name].secrets())
                          for name in due if name not in silent}, float(setting("DELIVERY_TIMEOUT_S")), clock)
    errors: dict[str, str] = {}
    silent_until = {name: on_record[name][0] for name in silent}
    for name in due:
        target, (result, answered_at) = every[name], results.get(name, (None, None))
        if result is None:  # it gave a message no answer moments ago: this attempt does not wait on it
            errors[name] = f"not tried: {silent[name]}"
            db.session.add(Delivery(outbox_id=claim.message_id, channel=name, attempt=claim.attempt,
                                    outcome=NOT_TRIED, error=errors[name], duration_ms=0, at=clock()))
            continue
        if result.timed_out:
            silent_until[name] = silence.timed_out(name, result.error, claim.message_id, answered_at)
        elif name in on_record:  # it answered: its silence is over, and what waited for it goes now
            silence.answered(name)
            wake_waiting(name, answered_at)
        db.session.add(Delivery(outbox_id=claim.message_id, channel=name, attempt=claim.attempt,
                                outcome="sent" if result.ok else "failed", status_code=result.status_code,
                                error=result.error, duration_ms=result.duration_ms, at=answered_at))
        if result.ok and name == "workorder" and text.rule != "test":
            _store_external_id(snapshot["payload"].get("work_order_id"), result)
        if result.ok:
            log.info("outbox %s (%s) sent to %s %s in %d ms", claim.message_id, text.rule, name, target.masked_url,
                     result.duration_ms)
        else:
            errors[name] = result.error or "failed"
            log.warning("outbox %s (%s) to %s %s failed, attempt %s: %s", claim.message_id, text.rule, name,
                        target.masked_url, claim.attempt, result.error)
    if told := [answered_at for result, answered_at in results.values() if result.ok]:
        # Kept by the first attempt that reached anyone (one UPDATE, whichever deliverer gets there).
        db.session.execute(update(OutboxMessage).where(OutboxMessage.id == claim.message_id)
                           .values(first_sent_at=func.coalesce(OutboxMessage.first_sent_at,
                                                               literal(min(told), OutboxMessage.first_sent_at.type)))
                           .execution_options(synchronize_session=False))
    db.session.commit()
    # Failing only on silent channels (silent before, or since it timed out now): due again when their silence ends,
    # when one message tries them again, not sooner; and an attempt that tried none of them is not counted.
    wait = max(silent_until[name] for name in errors) if errors and set(errors) <= set(silent_until) else None
    return _after(claim, clock(), errors, snapshot, not_before=wait,
                  counted=not errors or not set(errors) <= set(silent))


def wake_waiting(channel: str, now: datetime) -> None:
    """Bring forward the messages waiting out a channel's silence, once it answered (and commit)."""
    db.session.execute(update(OutboxMessage).where(
        OutboxMessage.status == "pending", OutboxMessage.next_attempt_at > now,
        OutboxMessage.last_error.contains(f"{channel}: not tried", autoescape=True))
        .values(next_attempt_at=now).execution_options(synchronize_session=False))
    db.session.commit()


def _post_each(requests: dict[str, tuple[http.Request, tuple[str, ...]]], timeout_s: float,
               clock: Clock) -> dict[str, tuple[http.Result, datetime]]:
    """POST to every channel at once, so a message waits on its slowest channel rather than on their sum; return
    each result with when it came (the slowest ends the round, not the others' deliveries)."""
    def post(request, secrets):
        result = http.post(request, timeout_s, secrets)
        return result, clock()

    if len(requests) < 2:
        return {name: post(request, secrets) for name, (request, secrets) in requests.items()}
    with ThreadPoolExecutor(max_workers=len(requests), thread_name_prefix="delivery") as pool:
        futures = {name: pool.submit(post, request, secrets) for name, (request, secrets) in requests.items()}
        return {name: future.result() for name, future in futures.items()}


def _store_external_id(work_order_id, result: http.Result) -> None:
    external = workorder.external_id(result)
    if work_order_id and external:
        db.session.execute(update(WorkOrder).where(WorkOrder.id == work_order_id).values(external_id=external))


def _after(claim: Claim, now: datetime, errors: dict[str, str], snapshot: dict | None,
           not_before: datetime | None = None, counted: bool = True) -> str:
    """Mark the message delivered, due again after a backoff (not before `not_before`), or failed for good (and say
    so). An attempt that tried no channel it failed on (`counted` False) is given back, while the message is younger
    than its attempts would take a minute apart: a message is not lost on a channel it never asked."""
    if not errors:
        settled = _settle(claim, status="delivered", delivered_at=now, next_attempt_at=now, last_error=None)
        if settled and snapshot and snapshot["payload"].get("rule") in notice.DEAD_RULES:
            log.info("alert latency %.1f s for outbox %s (dead letter to delivered)",
                         (now - snapshot["created_at"]).total_seconds(), claim.message_id)
        if settled and snapshot and snapshot["payload"].get("resent_by"):
            losses.after_resent(snapshot["kind"], now)
        db.session.commit()
        return "delivered"
    error = "; ".join(f"{name}: {text}" for name, text in sorted(errors.items()))[:2000]
    plain = next(iter(errors.values())) if len(errors) == 1 else error
    kind = snapshot["kind"] if snapshot else db.session.get(OutboxMessage, claim.message_id).kind
    attempts = int(setting("DELIVERY_ATTEMPTS"))
    given_back = not counted and snapshot is not None and (
        now - snapshot["created_at"]).total_seconds() < attempts * silence.SILENT_S
    if (claim.attempt < attempts or given_back) and kind != "test":
        due = now + timedelta(seconds=float(setting("DELIVERY_BACKOFF_S")) * 2 ** (claim.attempt - 1))
        requeued = _requeue(claim, now, next_attempt_at=max(due, not_before or due), last_error=error,
                            **({"attempts": claim.attempt - 1} if given_back else {}))
        return "merged" if requeued == "merged" else "retrying"
    if _settle(claim, status="failed", next_attempt_at=now, last_error=error) and kind != "test":
        losses.raise_for(claim.message_id, claim.attempt, now, errors, plain, (snapshot or {}).get("title"))
    db.session.commit()
    return "failed"


def deliver_due(clock: Clock = SYSTEM_CLOCK, budget_s: float = TICK_BUDGET_S, limit: int = 1000) -> Counter:
    """Deliver every due message, one claim at a time, until none is due or the time budget is spent."""
    started, outcomes = time.monotonic(), Counter()
    while sum(outcomes.values()) < limit and time.monotonic() - started < budget_s:
        claim = claim_next(clock())
        if claim is None:
            break
        outcomes[deliver(claim, clock)] += 1
    return outcomes
