"""Start, stop and follow bulk replays of dead letters (paced_replay.py does the work); progress is kept in Redis."""

import json
import uuid
from dataclasses import dataclass, replace
from datetime import datetime

from rq import Queue
from rq.job import Job, JobStatus
from sqlalchemy import func, select

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import Run, Tenant
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.dlq import groups as dlq
from console.services.dlq.filters import Filters
from console.services.engine.queueing import MAINTENANCE_QUEUE
from console.services.errors import Conflict, InvalidInput, NotFound

JOB = "jobs.bulk.replay_matching"
KEY = "rebound:bulk:{}"
RUNS = "rebound:bulk:{}:runs"  # the runs an operation restarted, to tell how they ended
RECENT = "rebound:bulk:recent"
KEEP_S = 7 * 24 * 3600
KEEP_RECENT = 20
DEFAULT_RATE, MAX_RATE = 50, 1000
# The rate asked for "as fast as it safely can", stored as rate 0: no pacing, chunks of FAST_CHUNK letters.
FASTEST = "max"
# One transaction each, a handful of set-based statements whatever its size: SQLite's write lock is held for one
# chunk (~0.4 s at 5,000 here), then every waiting writer (workers claiming and finishing runs, people's clicks)
# gets its turn before the next. 5,000 against 2,000: 81 against 105 µs of CPU a letter (commits and statements
# spread over more letters); larger would hold the lock longer for little more.
FAST_CHUNK = 5000
# One job works this long, then queues its own continuation: a single worker then also runs the
# replayed attempts (on the default queue, which it reads first) instead of waiting for the whole batch.
SLICE_S = 10.0
CHUNK = 100
RUNNING = ("queued", "running", "stopping")
QUIET_S = 15  # a replay replays a chunk every second or two: this long without one, its page says so


PACE_AFTER_S = 5  # seconds a bulk replay goes before its pace so far says anything


@dataclass(frozen=True)
class Progress:
    """One bulk operation as its Redis hash tells it."""

    op_id: str
    status: str
    total: int
    done: int
    failed: int
    skipped: int
    rate: float
    actor: str
    filter: str
    started_at: datetime | None
    finished_at: datetime | None
    tenant_id: int | None
    last_error: str = ""
    fixes_closed: int = 0  # params fixes that waited for approval on the letters replayed, closed as superseded
    beat: datetime | None = None  # when it last replayed a chunk or queued its next slice
    slice_queued: bool = False  # its next slice's job waits in its queue for a free worker

    def quiet_s(self, now: datetime) -> int | None:
        """Seconds since it last moved, once that is long enough to say (a worker killed mid-slice left "running ·
        0 of 5,000" on the page for minutes, saying nothing; helper 170); else None."""
        if self.status not in ("running", "stopping") or self.beat is None:
            return None
        quiet = int((now - self.beat).total_seconds())
        return quiet if quiet >= QUIET_S else None

    @property
    def processed(self) -> int:
        return self.done + self.failed + self.skipped

    @property
    def running(self) -> bool:
        return self.status in RUNNING

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, round(100 * self.processed / self.total))

    @property
    def fastest(self) -> bool:
        return not self.rate

    def outcomes(self) -> "Outcomes":
        """Tell how the runs this operation restarted stand now (read from the database at each call)."""
        return outcomes(self.op_id)

    def pace(self, now: datetime) -> float | None:
        """Letters a second so far, once it has gone long enough to tell; else None."""
        elapsed = (now - self.started_at).total_seconds() if self.started_at else 0
        return self.processed / elapsed if self.processed and elapsed >= PACE_AFTER_S else None

    def eta_s(self, now: datetime) -> int | None:
        """Seconds left at the pace seen so far when that is slower than the rate asked for (the workers run the
        runs it replays between its slices: asked 50/s, it went at 10/s, and "52 s left" stood for minutes),
        else at that rate; None for as fast as it can before it has gone a while."""
        seen = self.pace(now)
        pace = min(rate for rate in (self.rate, seen) if rate) if self.rate or seen else None
        return round(max(0, self.total - self.processed) / pace) if pace else None


@dataclass(frozen=True)
class Outcomes:
    """How the runs a bulk replay restarted stand now: the replay re-queues them, the workers decide how they end."""

    succeeded: int = 0
    dead: int = 0  # died again: back in the dead-letter queue
    waiting: int = 0  # not ended yet: pending, running, waiting to retry (a breaker may hold them), compensating
    other: int = 0  # cancelled, compensated, or resolved by a person

    @property
    def settled(self) -> bool:
        return not self.waiting


STILL_GOING = frozenset({"pending", "running", "retry_wait", "failed", "compensating"})
DIED_AGAIN = frozenset({"dead", "compensation_failed"})
OUTCOME_CHUNK = 1000


def outcomes(op_id: str) -> Outcomes:
    """Count the operation's restarted runs by how they stand now."""
    run_ids = sorted(int(value) for value in get_redis().smembers(RUNS.format(op_id)))
    counts: dict[str, int] = {}
    for start in range(0, len(run_ids), OUTCOME_CHUNK):
        chunk = run_ids[start:start + OUTCOME_CHUNK]
        for status, count in db.session.execute(select(Run.status, func.count()).where(Run.id.in_(chunk))
                                                .group_by(Run.status)):
            counts[status] = counts.get(status, 0) + count
    return Outcomes(succeeded=counts.pop("succeeded", 0), dead=sum(counts.pop(status, 0) for status in DIED_AGAIN),
                    waiting=sum(counts.pop(status, 0) for status in STILL_GOING), other=sum(counts.values()))


def rate_of(rate) -> float:
    """Return a bulk replay's rate in runs per second (0: as fast as it safely can), or an InvalidInput."""
    if rate == FASTEST:
        return 0.0
    try:
        value = float(rate)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int too large for a float
        raise InvalidInput(f"the rate is a number of runs per second, or {FASTEST!r}: as fast as it safely can",
                           "rate") from None
    if not 1 <= value <= MAX_RATE:
        raise InvalidInput(f"the rate must be between 1 and {MAX_RATE} runs per second, or {FASTEST!r}: as fast as "
                           "it safely can", "rate")
    return value


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _progress(op_id: str, raw: dict) -> Progress:
    fields = {key.decode(): value.decode() for key, value in raw.items()}
    number = lambda name: int(fields.get(name) or 0)  # noqa: E731 - a local shorthand
    progress = Progress(op_id, fields.get("status", "unknown"), number("total"), number("done"), number("failed"),
                        number("skipped"), float(fields.get("rate") or 0), fields.get("actor", ""),
                        fields.get("filter", ""), _time(fields.get("started_at")), _time(fields.get("finished_at")),
                        int(fields["tenant_id"]) if fields.get("tenant_id") else None, fields.get("last_error", ""),
                        number("fixes_closed"), _time(fields.get("beat")))
    # Only a replay quiet long enough to be said asks Redis about its job: the panel reads itself every second.
    if progress.quiet_s(SYSTEM_CLOCK()) is not None:
        progress = replace(progress, slice_queued=job_waits(fields.get("job_id")))
    return progress


def job_waits(job_id: str | None) -> bool:
    """Tell whether a replay's job waits in its queue (a busy queue is no stopped worker)."""
    if not job_id:
        return False
    job = Job.fetch_many([job_id], connection=get_redis())[0]
    return job is not None and job.get_status() in (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED)


def _visible(progress: Progress, tenant_id: int | None) -> bool:
    return tenant_id is None or progress.tenant_id == tenant_id


def get(op_id: str, tenant_id: int | None = None) -> Progress:
    """Return a bulk operation this tenant scope may see, or raise NotFound."""
    raw = get_redis().hgetall(KEY.format(op_id)) if op_id.isalnum() else {}
    progress = _progress(op_id, raw) if raw else None
    if progress is None or not _visible(progress, tenant_id):
        raise NotFound(f"no bulk operation {op_id} (they are kept for 7 days)")
    return progress


def recent(tenant_id: int | None, include: str | None = None) -> list[Progress]:
    """Return the bulk operations still running, plus `include` whatever its state, newest first."""
    redis = get_redis()
    ids = [value.decode() for value in redis.lrange(RECENT, 0, KEEP_RECENT - 1)]
    if include and include.isalnum() and include not in ids:
        ids.insert(0, include)
    with redis.pipeline() as pipe:
        for op_id in ids:
            pipe.hgetall(KEY.format(op_id))
        found = pipe.execute()
    shown = [_progress(op_id, raw) for op_id, raw in zip(ids, found, strict=True) if raw]
    return [p for p in shown if _visible(p, tenant_id) and (p.running or p.op_id == include)]


def enqueue_slice(op_id: str, work: dict, after_id: int, redis, pipeline=None):
    """Queue one time slice of a bulk replay, from the letter after `after_id`; return its RQ job."""
    return Queue(MAINTENANCE_QUEUE, connection=redis).enqueue(
        JOB, args=(op_id,), kwargs={**work, "after_id": after_id}, job_timeout=int(SLICE_S) + 600, result_ttl=0,
        failure_ttl=KEEP_S, pipeline=pipeline)


def start_replay(actor: Actor, tenant_id: int | None, *, ids: list[int] | None = None,
                 filters: Filters | None = None, upto: int | None = None, rate=DEFAULT_RATE,
                 clock: Clock = SYSTEM_CLOCK) -> Progress:
    """Start replaying the selected dead letters, or all that match the filters (`upto`: none newer than this id,
    the newest the person was shown), at `rate` runs per second.

    `rate` "max" replays as fast as it safely can: one transaction per chunk of FAST_CHUNK letters, no pause between
    them; the workers still run the replayed attempts within each policy's concurrency and queue limits.
    """
    rate = rate_of(rate)
    now = clock()
    if ids is not None:
        ids = sorted(set(ids))
        if not ids:
            raise InvalidInput("select the dead letters to replay", "id")
        if len(ids) > dlq.MAX_SELECTED:
            raise InvalidInput(f"select at most {dlq.MAX_SELECTED} dead letters, or replay all matching", "id")
        letters = [letter for letter in dlq.visible(ids, tenant_id) if letter.status == "open"]
        chosen = len(ids)
        ids, total, job_filters = [letter.id for letter in letters], len(letters), None
        described = f"selected dead letters {', '.join(map(str, ids[:20]))}{' …' if len(ids) > 20 else ''}"
        if total and total < chosen:  # said, not silently dropped; which of the two reasons is not (another tenant's)
            described += f" ({chosen - total:,} of the {chosen:,} chosen left out: not open, or not found here)"
        recorded = {"ids": ids}
        of = {letter.tenant_id for letter in letters}
        of_tenants = {db.session.get(Tenant, of.pop()).name} if len(of) == 1 else set()
    else:
        # Bulk replay only ever touches open dead letters, whatever status the page showed.
        filters = (filters or Filters()).with_status("open")
        bounds = dlq.bounds(filters, tenant_id, now)
        if bounds is not None and upto is not None:
            bounds = replace(bounds, max_id=min(bounds.max_id, upto))
        total = dlq.count_matching(filters, tenant_id, cap=None, bounds=bounds) if bounds else 0
        job_filters = {**filters.to_dict(), "as_of": now.isoformat(), "min_id": bounds and bounds.min_id,
                       "max_id": bounds and bounds.max_id}
        described = filters.describe(dlq.group_words(filters.group, tenant_id))
        recorded = {"filter": filters.args()}
        of_tenants = {filters.tenant} if filters.tenant else set()
    if not total:
        raise InvalidInput("no open dead letters to replay: they may have been replayed or discarded already", "id")
    op_id = uuid.uuid4().hex[:12]
    key = KEY.format(op_id)
    # The tenant whose letters it replays, for the audit's tenant filter: a person's own, the filter's, or the one
    # tenant of the letters selected (an operation of every tenant's letters has none; helper 112).
    tenant = db.session.get(Tenant, tenant_id).name if tenant_id else (
        next(iter(of_tenants)) if len(of_tenants) == 1 else None)
    # The audit row joins the transaction first, the progress hash and the job go to Redis in one MULTI, and
    # the commit comes last: a Redis failure leaves no audit of an operation that never started.
    audit.record(db.session, actor, "dead_letter.bulk_replay", "bulk_operation", op_id, tenant=tenant,
                 after={"count": total, "rate": rate, **recorded}, note=described, clock=clock)
    redis = get_redis()
    work = {"ids": ids if job_filters is None else None, "filters": job_filters, "tenant_id": tenant_id, "rate": rate,
            "actor": _actor_dict(actor)}
    with redis.pipeline() as pipe:
        # RQ starts the transaction itself, so its enqueue comes first in the pipeline.
        job = enqueue_slice(op_id, work, 0, redis, pipeline=pipe)
        # What its jobs do and the last one's id, and when it last moved: a replay whose worker was killed mid-way is
        # continued from there (paced_replay.resume_stalled).
        pipe.hset(key, mapping={"kind": "replay", "status": "queued", "total": total, "done": 0, "failed": 0,
                                "skipped": 0, "rate": rate, "actor": actor.name, "filter": described,
                                "selection": json.dumps(recorded), "tenant_id": tenant_id or "",
                                "audit_tenant": tenant or "", "started_at": now.isoformat(), "finished_at": "",
                                "job": json.dumps(work), "job_id": job.id, "beat": now.isoformat()})
        pipe.expire(key, KEEP_S)
        pipe.lpush(RECENT, op_id)
        pipe.ltrim(RECENT, 0, KEEP_RECENT - 1)
        pipe.execute()
    try:
        db.session.commit()
    except Exception:
        # Not audited, so it must not run: the job stops before its first replay.
        redis.hset(key, mapping={"status": "stopping", "last_error": "the audit record could not be written"})
        raise
    return get(op_id, tenant_id)


def _actor_dict(actor: Actor) -> dict:
    return {"name": actor.name, "id": actor.id, "remote_addr": actor.remote_addr}


def stop(op_id: str, actor: Actor, tenant_id: int | None, clock: Clock = SYSTEM_CLOCK) -> Progress:
    """Ask a running bulk replay to stop after the entry it is on."""
    progress = get(op_id, tenant_id)
    if not progress.running:
        raise Conflict(f"bulk operation {op_id} is already {progress.status}", "status")
    redis = get_redis()
    redis.hset(KEY.format(op_id), "status", "stopping")
    # Under the start's tenant, with how far it had come (the row said "stopping" alone; helper 112).
    tenant = (redis.hget(KEY.format(op_id), "audit_tenant") or b"").decode() or None
    audit.record(db.session, actor, "dead_letter.bulk_replay_stop", "bulk_operation", op_id, tenant=tenant,
                 before={"status": progress.status, "done": progress.done},
                 after={"status": "stopping", "processed": progress.processed, "total": progress.total}, clock=clock)
    db.session.commit()
    return get(op_id, tenant_id)
