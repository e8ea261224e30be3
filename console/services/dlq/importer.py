"""Bring failures from before Rebound into its DLQ: a dead run, its attempts and a dead letter each, grouped."""

import hashlib
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, tuple_, update

from console.db.upsert import insert_for
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import MAX_CODE_CHARS, MAX_MESSAGE_CHARS, Failure
from console.domain.words import plural
from console.extensions import db
from console.models import DeadLetter, Run, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.dlq.import_sources import RETURNED_RETRY, Failed
from console.services.engine import diagnostics, handler_kinds, parking, transitions
from console.services.errors import InvalidInput
from console.services.people import tenants as tenant_rows
from console.services.policies import versions as policies
from console.services.reports import rollup

RUNS = Run.__table__
# A dead letter of an imported job reads as one whose retries ran out: RQ moves a job to its failed registry
# when its last try failed, and a replay of such a group needs no "failed for good" confirmation.
LETTER_REASON = "exhausted"
MAX_KEY = 200
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
CLOCK_SKEW = timedelta(minutes=5)  # the other host's clock may run a little ahead of ours


@dataclass
class Plan:
    """What an import would write: the failures with their handlers, counted by function and by group."""

    source: str
    items: list[tuple[Failed, str, int]] = field(default_factory=list)  # (failure, handler, tenant id)
    by_function: Counter = field(default_factory=Counter)
    by_group: Counter = field(default_factory=Counter)  # (function, error type, fingerprint) → count
    unmapped: Counter = field(default_factory=Counter)  # functions no --map names, with their counts
    # The failures of those functions with their tenant ids: the dry run counts them into their tenants too.
    waiting_for_map: list[tuple[Failed, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Imported:
    """What an import wrote."""

    imported: int
    already: int  # jobs a previous import of this source brought in already
    dead_letters: list[int]
    work_orders: int
    remapped: int = 0  # jobs imported before whose open letters were pointed at the handler --map names now


def parse_mapping(pairs: list[str]) -> dict[str, str]:
    """Parse `function.path=kind:handler` pairs into a mapping, checking each handler exists."""
    mapping = {}
    for pair in pairs:
        function, sep, handler = pair.partition("=")
        if not sep or not function.strip() or not handler.strip():
            raise InvalidInput(f"--map takes rq.function.path=python:handler, got {pair!r}", "map")
        function, handler = function.strip(), handler_kinds.normalise(handler.strip())
        if mapping.get(function, handler) != handler:
            raise InvalidInput(f"--map gives {function} two handlers ({mapping[function]} and {handler}); give one",
                               "map")
        mapping[function] = handler
    return mapping


def key_of(failed: Failed) -> str:
    """Return the run's idempotency key, so a second import finds the first: an RQ job's identity (its id and
    creation time: the same job read through localhost or 127.0.0.1 is one), or a line's source and id."""
    key = f"import:rq:{failed.identity}" if failed.identity else f"import:{failed.source}:{failed.job_id}"
    return _bounded(key, failed.source)


def _legacy_key(failed: Failed) -> str | None:
    """Return the key an RQ job was imported under before keys named its identity (the Redis's address as typed)."""
    return _bounded(f"import:{failed.source}:{failed.job_id}", failed.source) if failed.identity else None


def _bounded(key: str, source: str) -> str:
    if len(key) <= MAX_KEY:
        return key
    return f"import:{source[:60]}:sha1:{hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()}"


def plan(failures: list[Failed], source: str, mapping: dict[str, str], tenant: str | None, *,
         clock: Clock = SYSTEM_CLOCK) -> Plan:
    """Decide each failure's handler and tenant, count them, and list the functions that need a --map."""
    if tenant is not None and tenant_rows.find(tenant) is None:  # even when every line names its own
        raise InvalidInput(f"no tenant named {tenant!r} (create it first: rebound tenants create {tenant})", "tenant")
    result = Plan(source)
    tenant_ids: dict[str, int] = {}
    seen: dict[str, str] = {}  # job id → the line that had it
    now = clock()
    for failed in failures:
        if failed.job_id in seen:  # a second line would be dropped as "imported before"
            raise InvalidInput(f"{failed.where}: id {failed.job_id!r} is also on {seen[failed.job_id]}; each failed "
                               "job is one line with its own id", "id")
        seen[failed.job_id] = failed.where
        _check_times(failed, now)
        name = failed.tenant or tenant or tenant_rows.DEFAULT
        if name not in tenant_ids:
            found = tenant_rows.find(name)
            if found is None:
                raise InvalidInput(f"{failed.where}: no tenant named {name!r} (create it first: rebound tenants "
                                   f"create {name})", "tenant")
            tenant_ids[name] = found.id
        handler = mapping.get(failed.function)
        if handler is None and failed.handler:
            try:
                handler = handler_kinds.normalise(failed.handler)
            except InvalidInput as error:
                raise InvalidInput(f"{failed.where}: {error.detail}", "handler") from None
        failure = _failure(failed)
        result.by_function[failed.function] += 1
        result.by_group[(failed.function, failure.code, failure.fingerprint)] += 1
        if handler is None:
            result.unmapped[failed.function] += 1
            result.waiting_for_map.append((failed, tenant_ids[name]))
        else:
            result.items.append((failed, handler, tenant_ids[name]))
    return result


def _check_times(failed: Failed, now) -> None:
    """Refuse a time no failed job can have (after now, before 1970) or out of order (failed before enqueued)."""
    times = [(name, moment) for name, moment in (("enqueued_at", failed.enqueued_at),
                                                 ("started_at", failed.started_at),
                                                 ("failed_at", failed.failed_at)) if moment is not None]
    for name, moment in times:
        if not EARLIEST <= moment <= now + CLOCK_SKEW:
            raise InvalidInput(f"{failed.where}: {name} {moment:%Y-%m-%d %H:%M} UTC is not a past time of a job "
                               "(from 1970 to now)", name)
    for (earlier, first), (later, second) in zip(times, times[1:], strict=False):
        if second < first:
            raise InvalidInput(f"{failed.where}: {later} ({second:%Y-%m-%d %H:%M:%S}) is before {earlier} "
                               f"({first:%Y-%m-%d %H:%M:%S})", later)


def refuse_unmapped(result: Plan) -> None:
    """Raise a 422 naming every function without a handler: a replay of it would have nothing to run."""
    if result.unmapped:
        named = ", ".join(f"{function} ({count})" for function, count in sorted(result.unmapped.items()))
        raise InvalidInput(f"no handler for: {named}; add --map function=python:handler for each "
                           "(nothing was imported)", "map")


@dataclass(frozen=True)
class Earlier:
    """A planned job an earlier import brought in: its run, the handler it was mapped to, its letter's status."""

    run_id: int
    handler: str
    letter: str | None  # open, replayed, discarded, resolved (None: no letter)


@dataclass(frozen=True)
class Remap:
    """A job imported before under another handler than this import's --map names for its function."""

    function: str
    run_id: int
    was: str
    now: str
    letter: str | None


def already_imported(result: Plan, chunk: int = 500) -> int:
    """Count the planned jobs an earlier import brought in (what a dry run would skip)."""
    return len(imported_before(result, chunk))


def imported_before(result: Plan, chunk: int = 500) -> dict[str, Earlier]:
    """Return the planned jobs an earlier import brought in, into any tenant, by key: imported into another
    tenant, a job was imported again, and replaying both copies ran it twice (helper 97)."""
    # Every tenant's (tenant, key) pair: the runs' unique index serves that, where a key alone would scan the table.
    tenant_ids = db.session.execute(select(Tenant.id)).scalars().all()
    pairs = [(tenant_id, key_of(failed)) for failed, _, _ in result.items for tenant_id in tenant_ids]
    found = {}
    for start in range(0, len(pairs), chunk):
        found.update(_earlier(tuple_(RUNS.c.tenant_id, RUNS.c.idempotency_key).in_(pairs[start:start + chunk])))
    legacy = _imported_under_legacy_keys(result, chunk)
    found.update({key_of(failed): legacy[failed.identity] for failed, _, _ in result.items
                  if failed.identity in legacy})
    return found


def _earlier(condition) -> dict[str, Earlier]:
    """Read the runs the condition selects with their letters: key → Earlier."""
    rows = db.session.execute(select(RUNS.c.idempotency_key, RUNS.c.id, RUNS.c.handler, DeadLetter.status)
                              .outerjoin(DeadLetter, DeadLetter.run_id == RUNS.c.id).where(condition)
                              .order_by(DeadLetter.id))
    return {key: Earlier(run_id, handler, status) for key, run_id, handler, status in rows}


def _imported_under_legacy_keys(result: Plan, chunk: int = 500) -> dict[str, Earlier]:
    """Return, by identity, the planned RQ jobs an import before identity keys brought in: a run under the old key
    whose creation time is the job's (a job id reused for a new job is another job)."""
    wanted = {(tenant_id, legacy): failed for failed, _, tenant_id in result.items
              if (legacy := _legacy_key(failed)) is not None}
    pairs, found = list(wanted), {}
    for start in range(0, len(pairs), chunk):
        for tenant_id, key, created_at, run_id, handler, letter in db.session.execute(
                select(RUNS.c.tenant_id, RUNS.c.idempotency_key, RUNS.c.created_at, RUNS.c.id, RUNS.c.handler,
                       DeadLetter.status).outerjoin(DeadLetter, DeadLetter.run_id == RUNS.c.id).where(
                    tuple_(RUNS.c.tenant_id, RUNS.c.idempotency_key).in_(pairs[start:start + chunk]))
                .order_by(DeadLetter.id)):  # a run's newest letter last: its status is the one kept
            failed = wanted[(tenant_id, key)]
            if created_at == (failed.enqueued_at or failed.failed_at):
                found[failed.identity] = Earlier(run_id, handler, letter)
    return found


def remaps(result: Plan, earlier: dict[str, Earlier]) -> list[Remap]:
    """List the jobs imported before whose handler is not the one this import's --map gives their function: a typo in
    a first --map stayed for good, and a replay ran the wrong function (helper 119)."""
    return [Remap(failed.function, before.run_id, before.handler, handler, before.letter)
            for failed, handler, _ in result.items
            if (before := earlier.get(key_of(failed))) is not None and before.handler != handler]


def refuse_open_remaps(found: list[Remap]) -> None:
    """Raise a 422 naming the open letters an import would leave on another handler than its --map says."""
    open_ones = [remap for remap in found if remap.letter == "open"]
    if open_ones:
        raise InvalidInput(f"{remap_words(open_ones)}; give --remap to point their open letters at the handler --map "
                           "names now (it replays nothing), or correct --map (nothing was imported)", "map")


def remap_words(found: list[Remap]) -> str:
    """Say which functions' jobs imported before run another handler: 'app.charge: 2 jobs imported before run
    python:x, --map says python:y'."""
    counted = Counter((remap.function, remap.was, remap.now) for remap in found)
    return "; ".join(f"{function}: {plural(count, 'job')} imported before {'runs' if count == 1 else 'run'} {was}, "
                     f"--map says {now}" for (function, was, now), count in sorted(counted.items()))


def _failure(failed: Failed) -> Failure:
    return Failure(failed.error_type[:MAX_CODE_CHARS] or "UnknownError", failed.error_message[:MAX_MESSAGE_CHARS],
                   retryable=True)


def run_import(result: Plan, actor: Actor, *, remap: bool = False, clock: Clock = SYSTEM_CLOCK) -> Imported:
    """Write the plan in one transaction, audit it once with its counts, and commit; a job seen before adds nothing.

    A job imported before under another handler than --map now names is refused while its letter is open, unless
    `remap`: then its run and letter take the handler --map names (a replayed, discarded or resolved one stays)."""
    refuse_unmapped(result)
    now = clock()
    # The policy a replay will use (the default's version now), so the run page names it as for any run.
    version = policies.effective(None, {})[0]
    letters, already, orders = [], 0, set()
    before = imported_before(result)
    moved = [found for found in remaps(result, before) if found.letter == "open"]
    if not remap:
        refuse_open_remaps(moved)
    tenants_of, moments = Counter(), []
    try:
        for failed, handler, tenant_id in result.items:
            run = None if key_of(failed) in before else _insert_run(failed, handler, tenant_id, version, now)
            if run is None:
                already += 1
                continue
            tenants_of[tenant_id] += 1
            moments += [run.created_at, run.finished_at]
            _timeline(run, failed, now)
            # Said in its alert: "python:demo.noop failed" blamed the handler a replay will run, which never ran
            # (helper 156).
            letter = parking.park(run, _failure(failed), LETTER_REASON, run.finished_at, learned_at=now,
                                  imported_from=failed.function)
            letters.append(letter.id)
            orders.add(letter.work_order_id)
        remapped = _remap(moved, now)
        moments += [moment for row in remapped for moment in row.pop("times")]
        names = tenant_names(tenants_of)
        whole = {"imported": len(letters), "already_imported": already, "work_orders": len(orders),
                 "by_function": dict(Counter(f.function for f, _, _ in result.items)),
                 "by_tenant": {names[tenant_id]: count for tenant_id, count in sorted(tenants_of.items())},
                 # The --map choices: which handler each function's replays run (they were in no record).
                 "handlers": dict(sorted({f.function: handler for f, handler, _ in result.items}.items())),
                 **({"remapped": remapped} if remapped else {})}
        # Into several tenants: a row of each tenant's own, so each tenant's people see what came into it (a row of no
        # tenant, as one across tenants was, is hidden from people limited to one; helper 156).
        changes = [audit.Change(result.source, after=whole, tenant=names[tenant_id] if tenant_id else None)
                   for tenant_id in (list(tenants_of) if len(tenants_of) == 1 else [None])]
        if len(tenants_of) > 1:
            changes += [audit.Change(result.source, tenant=names[tenant_id], after={
                "imported": count, "of_the_import": {"imported": len(letters), "tenants": len(tenants_of)},
                "by_function": dict(Counter(f.function for f, _, t in result.items if t == tenant_id))})
                for tenant_id, count in sorted(tenants_of.items())]
        audit.record_many(db.session, actor, "dead_letter.import", "import", changes, clock=lambda: now)
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
    # The failures keep their own times, which the report rollups' minute pass has left behind: their days are
    # counted again now, so a report's figure and the list it opens agree (helper 159).
    rollup.recompute_days(moments, clock)
    return Imported(len(letters), already, letters, len(orders), len(moved))


def tenant_names(tenant_ids) -> dict[int, str]:
    """Name the tenants of these ids."""
    return dict(db.session.execute(select(Tenant.id, Tenant.name).where(Tenant.id.in_(list(tenant_ids)))).all())


def _remap(moved: list[Remap], now) -> list[dict]:
    """Point the runs and open letters of jobs imported before at the handler --map names now; return what moved."""
    done = []
    for found in moved:
        # Guarded: a letter replayed meanwhile keeps the handler its replay ran.
        changed = db.session.execute(update(DeadLetter).where(
            DeadLetter.run_id == found.run_id, DeadLetter.status == "open", DeadLetter.handler == found.was)
            .values(handler=found.now).execution_options(synchronize_session=False)).rowcount
        if changed:
            times = db.session.execute(update(Run).where(Run.id == found.run_id, Run.status == "dead")
                                       .values(handler=found.now, updated_at=now)
                                       .returning(Run.created_at, Run.finished_at)
                                       .execution_options(synchronize_session=False)).all()
            done.append({"run_id": found.run_id, "function": found.function, "from": found.was, "to": found.now,
                         "times": [moment for row in times for moment in row]})
    return done


def _insert_run(failed: Failed, handler: str, tenant_id: int, version: int, now) -> Run | None:
    """Insert the dead run unless this source's job is there already (ON CONFLICT on the idempotency key)."""
    failed_at = failed.failed_at or now
    values = dict(
        tenant_id=tenant_id, task_id=None, handler=handler, params=failed.params,
        policy_overrides={"timeout_s": failed.timeout_s} if failed.timeout_s else {},
        policy_version=version,
        idempotency_key=key_of(failed), status="dead", status_reason="imported", attempt=failed.attempts, series=1,
        executions=failed.attempts, scheduled_for=failed.enqueued_at or failed_at, enqueued_at=failed.enqueued_at,
        started_at=failed.started_at or failed.enqueued_at, finished_at=failed_at,
        created_at=failed.enqueued_at or failed_at, updated_at=now, progress=0,
        cancel_requested=False, error_code=failed.error_type[:MAX_CODE_CHARS], error_message=failed.error_message,
        trace_id=uuid.uuid4().hex, source="import")
    connection = db.session.connection()
    # An insert of a finished run, not a status change: two imports of one source at once insert it once.
    run_id = connection.execute(
        insert_for(connection)(RUNS).values(**values)
        .on_conflict_do_nothing(index_elements=[RUNS.c.tenant_id, RUNS.c.idempotency_key])
        .returning(RUNS.c.id)).scalar_one_or_none()
    return None if run_id is None else Run(id=run_id, **values)


def _earlier_try(failed: Failed) -> str:
    """Say what a try before the last did, as far as the source knows (a job that returned Retry raised nothing)."""
    if failed.error_type == RETURNED_RETRY:
        return "returned Retry before Rebound (time not recorded)"
    return "failed before Rebound (time not recorded)"


def _timeline(run: Run, failed: Failed, now) -> None:
    """Write the run's history: submitted, then each attempt (times known only for the last attempt's start and end)."""
    start = failed.enqueued_at or run.finished_at
    origin = {"source": failed.source, "job_id": failed.job_id, "function": failed.function, **failed.extra}
    rows = [transitions.event_row(run_id=run.id, at=start, kind="submitted", to_status="pending", attempt=0,
                                  series=1, actor="import", data={"source": "import", "imported": origin})]
    for number in range(1, failed.attempts + 1):
        last = number == failed.attempts
        rows.append(transitions.event_row(run_id=run.id, at=(run.started_at or start) if last else start,
                                          kind="running", from_status="pending" if number == 1 else "retry_wait",
                                          to_status="running",
                                          attempt=number, series=1))
        rows.append(transitions.event_row(
            run_id=run.id, at=run.finished_at if last else start, kind="dead" if last else "retry_wait",
            from_status="running", to_status="dead" if last else "retry_wait",
            reason=LETTER_REASON if last else "retryable", attempt=number, series=1,
            error_code=None if not last and failed.error_type == RETURNED_RETRY else run.error_code,
            message=(failed.error_message if last else _earlier_try(failed))[:2000],
            data={"imported": True}))
    db.session.connection().execute(transitions.INSERT_EVENT, rows)
    if failed.traceback:
        # Bounded and masked as a worker's own capture is: an old traceback may hold a token or a password.
        found = diagnostics.Diagnostics(diagnostics.bounded_traceback(failed.traceback), [])
        diagnostics.store(run.id, 1, failed.attempts, found, run.finished_at)
