"""Work through a bulk replay: chunks of dead letters replayed at the rate asked for, one time slice per job."""

import contextlib
import gc
import json
import logging
import time
from collections import Counter
from datetime import datetime

from console.db import sqlite_bulk
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.dlq import bulk
from console.services.dlq import groups as dlq
from console.services.dlq.filters import Bounds, Filters
from console.services.engine import replays

log = logging.getLogger("rebound.dlq")


@contextlib.contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector for one chunk, as it was before once the chunk is done."""
    # A chunk makes tens of thousands of short-lived rows and tuples, freed by reference counting; counting them,
    # the collector ran often and walked the whole heap (~150 ms) every ~10,000 letters unless the start-up heap was
    # frozen (`rebound worker` freezes it): 0.105 → 0.096 s of CPU per 1,000 letters unfrozen, 0.095 → 0.088 frozen.
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _replay_chunk(letter_ids: list[int], tenant_id: int | None, actor: Actor, key: str,
                  queue=None) -> tuple[Counter, list[int]]:
    """Replay a chunk in one transaction; count its entries (done, skipped, failed); return the runs restarted."""
    try:
        with _collector_paused():
            outcome = replays.replay_many(letter_ids, actor, tenant_id=tenant_id, queue=queue)
        return (Counter(done=len(outcome.runs), skipped=len(outcome.skipped), fixes_closed=len(outcome.closed_fixes)),
                list(outcome.runs.values()))
    except Exception as error:  # noqa: BLE001 - one bad entry must not stop the operation; it is counted and logged
        db.session.rollback()
        if len(letter_ids) > 1:  # find the bad entry by halves: the others still go through, a few chunks at a time
            half = len(letter_ids) // 2
            first, first_runs = _replay_chunk(letter_ids[:half], tenant_id, actor, key, queue)
            second, second_runs = _replay_chunk(letter_ids[half:], tenant_id, actor, key, queue)
            return first + second, first_runs + second_runs
        log.exception("bulk replay: dead letter %s failed", letter_ids[0])
        get_redis().hset(key, "last_error", f"#{letter_ids[0]}: {type(error).__name__}: {error}"[:500])
        return Counter(failed=1), []


def run_replay(op_id: str, *, ids: list[int] | None = None, filters: dict | None = None,
               tenant_id: int | None = None, rate: float = bulk.DEFAULT_RATE, actor: dict | None = None,
               after_id: int = 0, slice_s: float = bulk.SLICE_S, clock: Clock = SYSTEM_CLOCK,
               sleep=time.sleep, monotonic=time.monotonic) -> str:
    """Replay the operation's dead letters in id order, from after_id, at most `rate` per second (0: unpaced).

    Works in chunks of up to one second's worth (bulk.FAST_CHUNK unpaced), each one transaction; after slice_s
    seconds it queues its continuation. Returns the operation's status.
    """
    redis, key = get_redis(), bulk.KEY.format(op_id)
    status = (redis.hget(key, "status") or b"").decode()
    if status not in bulk.RUNNING:
        return status or "missing"  # finished, or its progress expired: a late duplicate does nothing
    who = Actor(**(actor or {"name": "system"}))
    if filters is not None:
        pinned = dict(filters)
        bounds = Bounds(datetime.fromisoformat(pinned.pop("as_of")), pinned.pop("min_id"), pinned.pop("max_id"))
        chosen = Filters(**pinned)
    if status == "stopping":
        return _finish(key, "stopped", clock)
    if status == "queued":
        redis.hset(key, "status", "running")
    rate = float(rate)
    started, paced = monotonic(), 0
    size = max(1, min(bulk.CHUNK, int(rate))) if rate else bulk.FAST_CHUNK
    try:
        # Unpaced, chunks come back to back: SQLite's settings for a bulk write (console/db/sqlite_bulk.py), and
        # each chunk's runs are queued while the next one is written.
        with sqlite_bulk.bulk_writes() if not rate else contextlib.nullcontext(), \
                replays.QueuedBehind() if not rate else contextlib.nullcontext() as queue:
            while True:
                # Pace before each chunk: chunk n starts no earlier than (letters so far) / rate after the start.
                ahead = started + paced / rate - monotonic() if rate else 0
                if ahead > 0:
                    sleep(ahead)
                if paced and monotonic() - started >= slice_s:
                    work = {"ids": ids, "filters": filters, "tenant_id": tenant_id, "rate": rate, "actor": actor}
                    job = bulk.enqueue_slice(op_id, work, after_id, redis)
                    redis.hset(key, mapping={"job_id": job.id, "beat": clock().isoformat()})
                    return "running"
                if filters is not None:
                    batch = dlq.matching_ids(chosen, tenant_id, bounds, after_id, size)
                else:
                    batch = [i for i in ids or [] if i > after_id][:size]
                if not batch:
                    return _finish(key, "done", clock)
                counts, restarted = _replay_chunk(batch, tenant_id, who, key, queue)
                after_id, paced = batch[-1], paced + len(batch)
                with redis.pipeline() as pipe:
                    for counter, count in counts.items():
                        pipe.hincrby(key, counter, count)
                    if restarted:  # how they end is read from these (bulk.outcomes)
                        pipe.sadd(bulk.RUNS.format(op_id), *restarted).expire(bulk.RUNS.format(op_id), bulk.KEEP_S)
                    pipe.hset(key, mapping={"after_id": after_id, "beat": clock().isoformat()}).hget(key, "status")
                    if pipe.execute()[-1] == b"stopping":
                        return _finish(key, "stopped", clock)
    except Exception as error:
        redis.hset(key, "last_error", f"{type(error).__name__}: {error}"[:500])
        _finish(key, "failed", clock)
        raise


# A slice notes each chunk it replays (at most a second or two apart): this long without one, with its job not waiting
# in its queue, its worker died with it (killed, out of memory), and nothing else would move it on.
STALL_S = 120.0


def resume_stalled(clock: Clock = SYSTEM_CLOCK) -> list[str]:
    """Continue the bulk replays whose job died with its worker, from the letter after the last one they replayed
    (one asked to stop is finished as stopped); return their ids. The maintenance scheduler calls this every minute.

    Before, such a replay said "running" for the 7 days its progress is kept, and its Stop could never take.
    """
    redis, now, resumed = get_redis(), clock(), []
    for raw_id in redis.lrange(bulk.RECENT, 0, bulk.KEEP_RECENT - 1):
        op_id = raw_id.decode()
        key = bulk.KEY.format(op_id)
        fields = {name.decode(): value.decode() for name, value in redis.hgetall(key).items()}
        if fields.get("status") not in bulk.RUNNING or not fields.get("job") or not fields.get("beat"):
            continue  # finished, expired, or started before replays noted their work
        if (now - datetime.fromisoformat(fields["beat"])).total_seconds() < STALL_S or bulk.job_waits(fields["job_id"]):
            continue
        if fields["status"] == "stopping":
            _finish(key, "stopped", clock)
            continue
        after_id = int(fields.get("after_id") or 0)
        job = bulk.enqueue_slice(op_id, json.loads(fields["job"]), after_id, redis)
        redis.hset(key, mapping={"job_id": job.id, "beat": now.isoformat()})
        log.warning("bulk replay %s: its job stopped with its worker (after dead letter %s); continued from there",
                    op_id, after_id)
        resumed.append(op_id)
    return resumed


def _finish(key: str, status: str, clock: Clock) -> str:
    redis = get_redis()
    processed = sum(int(value or 0) for value in redis.hmget(key, "done", "failed", "skipped"))
    total = int(redis.hget(key, "total") or 0)
    mapping = {"status": status, "finished_at": clock().isoformat()}
    if status == "done" and processed < total:
        # Counted at the start but no longer open when reached: replayed or discarded meanwhile.
        redis.hincrby(key, "skipped", total - processed)
    redis.hset(key, mapping=mapping)
    return status

