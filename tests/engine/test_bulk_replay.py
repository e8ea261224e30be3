"""Bulk replay as fast as it safely can: set-based chunks of thousands, each letter replayed once, audited once.

Runs on SQLite and PostgreSQL (`make test`); the races start their writers at one barrier, in threads with their own
sessions, so on PostgreSQL they really overlap.
"""

from collections import Counter

import pytest
from rq import Queue
from sqlalchemy import func, select, text

from console.db import sqlite_bulk
from console.extensions import db
from console.models import AuditEntry, DeadLetter, Run, RunEvent
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.dlq import bulk as dlq_bulk
from console.services.dlq import discards, paced_replay, resolve
from console.services.dlq import groups as dlq
from console.services.dlq.filters import Filters
from console.services.engine import replays
from console.services.system.demo_history import seed_history
from tests.engine.test_concurrent_writers import race

OLGA = Actor("olga", remote_addr="10.0.0.7")


def open_letters() -> list[DeadLetter]:
    db.session.expire_all()
    letters = db.session.execute(select(DeadLetter).where(DeadLetter.status == "open").order_by(DeadLetter.id))
    return list(letters.scalars())


def replay_events() -> dict[int, list[int]]:
    """Return, per run, the dead letter each of its replay_of_dead_letter timeline rows names."""
    linked: dict[int, list[int]] = {}
    for event in db.session.execute(select(RunEvent).where(RunEvent.kind == "replay_of_dead_letter")).scalars():
        linked.setdefault(event.run_id, []).append(event.data["dead_letter_id"])
    return linked


def replay_audits() -> list[AuditEntry]:
    return list(db.session.execute(select(AuditEntry).where(AuditEntry.action == "dead_letter.replay")
                                   .order_by(AuditEntry.seq)).scalars())


def run_unpaced(op_id: str, **overrides) -> str:
    """Run the operation's queued job to its end in one go.

    Its time slice is unbounded: a loaded machine (CI's PostgreSQL pass) took over the 10 s slice for two chunks of a
    thousand and the job queued its continuation; slicing has its own test (tests/web/test_dlq.py).
    """
    (job,) = [job for job in Queue("maintenance", connection=get_redis()).jobs if job.args == (op_id,)]
    return paced_replay.run_replay(op_id, **{**job.kwargs, "slice_s": float("inf"), **overrides})


def test_a_bulk_replay_of_thousands_replays_each_letter_once_audited_once_with_the_chain_intact(app, clock,
                                                                                               monkeypatch):
    seed_history(3000, 3000, clock=clock)
    letters = open_letters()
    assert len(letters) == 3000
    monkeypatch.setattr(dlq_bulk, "FAST_CHUNK", 1000)
    chunks = []
    replay_many = replays.replay_many
    monkeypatch.setattr(replays, "replay_many", lambda ids, *a, **kw: chunks.append(len(ids)) or
                        replay_many(ids, *a, **kw))
    op = dlq_bulk.start_replay(OLGA, None, filters=Filters(), rate=dlq_bulk.FASTEST, clock=clock)
    assert run_unpaced(op.op_id) == "done" and chunks == [1000, 1000, 1000]
    progress = dlq_bulk.get(op.op_id)
    assert (progress.done, progress.skipped, progress.failed) == (3000, 0, 0)

    assert open_letters() == []
    by_letter = {letter.id: letter.run_id for letter in letters}
    runs = db.session.execute(select(Run.id, Run.status, Run.series, Run.attempt, Run.error_code, Run.status_reason)
                              .where(Run.id.in_(by_letter.values()))).all()
    assert Counter((status, series, attempt, error, reason) for _, status, series, attempt, error, reason in runs) == {
        ("pending", 2, 0, None, "replay"): 3000}
    # One link per run on its timeline, naming its own letter; one audit row per letter, in chain order.
    assert replay_events() == {run_id: [letter_id] for letter_id, run_id in by_letter.items()}
    entries = replay_audits()
    assert [int(entry.target_id) for entry in entries] == sorted(by_letter)
    first = entries[0]
    assert (first.actor, first.remote_addr, first.before, first.after) == (
        "olga", "10.0.0.7", {"status": "open"}, {"status": "replayed", "run_id": by_letter[int(first.target_id)],
                                                 "series": 2})
    assert all(entry.tenant for entry in entries)
    report = audit.verify(db.session, clock=clock)
    assert report.ok, report.problem
    assert report.checked == db.session.execute(select(func.count()).select_from(AuditEntry)).scalar_one()
    jobs = set(Queue("default", connection=get_redis()).job_ids)
    assert jobs == {f"run-{run_id}-s2-a0" for run_id in by_letter.values()}


def test_a_letter_replayed_by_someone_else_between_chunks_is_skipped_not_replayed_twice(app, clock, monkeypatch):
    seed_history(6, 6, clock=clock)
    letters = open_letters()
    op = dlq_bulk.start_replay(OLGA, None, filters=Filters(), rate=dlq_bulk.FASTEST, clock=clock)
    monkeypatch.setattr(dlq_bulk, "FAST_CHUNK", 3)
    matching_ids = dlq.matching_ids
    calls = []

    def bea_replays_one_in_the_second_chunk(*args, **kwargs):
        batch = matching_ids(*args, **kwargs)
        calls.append(batch)
        if len(calls) == 2:  # chosen for the chunk, then replayed by someone else before the chunk runs
            assert replays.replay_many([letters[4].id], Actor("bea")).runs
        return batch

    monkeypatch.setattr(dlq, "matching_ids", bea_replays_one_in_the_second_chunk)
    assert run_unpaced(op.op_id) == "done"
    assert calls[1] == [letter.id for letter in letters[3:]]
    progress = dlq_bulk.get(op.op_id)
    assert (progress.done, progress.skipped, progress.failed) == (5, 1, 0)
    db.session.expire_all()
    assert [db.session.get(DeadLetter, letter.id).resolved_by for letter in letters] == ["olga"] * 4 + ["bea", "olga"]
    assert {db.session.get(Run, letter.run_id).series for letter in letters} == {2}
    assert replay_events() == {letter.run_id: [letter.id] for letter in letters}
    assert Counter(entry.actor for entry in replay_audits()) == {"olga": 5, "bea": 1}
    assert audit.verify(db.session, clock=clock).ok


def test_an_unpaced_bulk_replay_stops_between_chunks_of_thousands(app, clock, monkeypatch):
    seed_history(2500, 2500, clock=clock)
    op = dlq_bulk.start_replay(OLGA, None, filters=Filters(), rate=dlq_bulk.FASTEST, clock=clock)
    monkeypatch.setattr(dlq_bulk, "FAST_CHUNK", 1000)
    matching_ids = dlq.matching_ids
    calls = []

    def stop_after_the_first_chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # a person presses Stop while the first chunk runs
            dlq_bulk.stop(op.op_id, Actor("bea"), None, clock=clock)
        return matching_ids(*args, **kwargs)

    monkeypatch.setattr(dlq, "matching_ids", stop_after_the_first_chunk)
    assert run_unpaced(op.op_id) == "stopped"
    progress = dlq_bulk.get(op.op_id)
    # The chunk under way when Stop came finishes; nothing after it starts.
    assert (progress.status, progress.done, progress.skipped) == ("stopped", 2000, 0)
    assert len(open_letters()) == 500 and len(replay_audits()) == 2000
    assert audit.verify(db.session, clock=clock).ok


def test_overlapping_bulk_replays_a_discard_and_a_resolve_racing_leave_each_letter_settled_once(app, clock):
    seed_history(300, 300, clock=clock)
    letters = open_letters()
    ids = [letter.id for letter in letters]
    runs_of = {letter.id: letter.run_id for letter in letters}
    resolving = [runs_of[letter_id] for letter_id in ids[130:150]]

    def work(index: int):
        now = clock()
        if index == 0:
            return replays.replay_many(ids[:200], OLGA, clock=clock).runs
        if index == 1:
            return replays.replay_many(ids[100:][::-1], Actor("bea"), clock=clock).runs
        if index == 2:
            discarded = discards.discard_open(ids[90:130], "handled by hand", Actor("cy"), now).ids
            db.session.commit()
            return discarded
        done = resolve.resolve(resolve.plan(resolving, None), "refunded by hand", Actor("di"), now)
        db.session.commit()
        return done.runs

    olga, bea, discarded, resolved = race(app, 4, work)
    for outcome in (olga, bea, discarded, resolved):
        assert not isinstance(outcome, Exception), outcome
    assert not set(olga) & set(bea) and not set(olga) & set(discarded) and not set(bea) & set(discarded)
    replayed = {**olga, **bea}
    assert set(replayed) | set(discarded) | {i for i in ids if runs_of[i] in resolved} == set(ids)
    db.session.expire_all()
    statuses = dict(db.session.execute(select(DeadLetter.id, DeadLetter.status)).all())
    # Who wins each letter is the race's to decide; that each is settled by one of them, once, is not.
    assert all(statuses[i] == "replayed" for i in replayed) and all(statuses[i] == "discarded" for i in discarded)
    series = dict(db.session.execute(select(Run.id, Run.series)).all())
    assert all(series[runs_of[i]] == (2 if i in replayed else 1) for i in ids)
    assert replay_events() == {runs_of[i]: [i] for i in replayed}
    entries = replay_audits()
    assert len(entries) == len(replayed) and {int(entry.target_id) for entry in entries} == set(replayed)
    assert db.session.execute(select(func.count()).select_from(DeadLetter).where(
        DeadLetter.status == "open")).scalar_one() == 0
    assert audit.verify(db.session, clock=clock).ok


@pytest.mark.sqlite_only  # the page cache is SQLite's; on PostgreSQL the block only pins the connection
def test_an_unpaced_replay_writes_its_chunks_with_the_bulk_page_cache_and_a_paced_one_does_not(app, clock,
                                                                                                monkeypatch):
    seed_history(4, 4, clock=clock)
    caches = []
    replay_many = replays.replay_many

    def noting_the_cache(ids, *args, **kwargs):
        caches.append(db.session.execute(text("PRAGMA cache_size")).scalar_one())
        return replay_many(ids, *args, **kwargs)

    monkeypatch.setattr(replays, "replay_many", noting_the_cache)
    monkeypatch.setattr(dlq_bulk, "FAST_CHUNK", 2)
    ids = [letter.id for letter in open_letters()]
    fast = dlq_bulk.start_replay(OLGA, None, ids=ids[:2], rate=dlq_bulk.FASTEST, clock=clock)
    assert run_unpaced(fast.op_id) == "done"
    paced = dlq_bulk.start_replay(OLGA, None, ids=ids[2:], rate=1000, clock=clock)
    assert run_unpaced(paced.op_id) == "done"
    assert caches == [-sqlite_bulk.BULK_CACHE_KIB, -sqlite_bulk.DEFAULT_CACHE_KIB]


def _restarted(run_ids: list[int]) -> list[replays.Restarted]:
    return [replays.Restarted(run_id, run_id, 1, 3, None, None, {}, 1) for run_id in run_ids]


def test_chunks_queued_behind_are_all_queued_in_order_by_the_end_of_the_block(app):
    with replays.QueuedBehind() as queue:
        queue(_restarted([11, 12]))
        queue(_restarted([13]))  # waits for the first chunk's call before handing this one over
    assert Queue("default", connection=get_redis()).job_ids == ["run-11-s2-a0", "run-12-s2-a0", "run-13-s2-a0"]


def test_a_chunk_redis_refuses_behind_the_writer_is_logged_for_the_reconciler_not_raised(app, redis_down, caplog):
    with replays.QueuedBehind() as queue:
        queue(_restarted([21, 22]))
    assert "2 replayed runs committed but not queued" in caplog.text


def test_a_bulk_replay_whose_worker_died_mid_way_is_continued_from_where_it_stopped(app, clock, monkeypatch):
    """Killed with its worker (kill -9, out of memory), a replay said "running" for the 7 days its progress is kept,
    with its letters after the last chunk never replayed and its Stop never taken (helper 130)."""
    seed_history(6, 6, clock=clock)
    letters = open_letters()
    monkeypatch.setattr(dlq_bulk, "FAST_CHUNK", 3)
    op = dlq_bulk.start_replay(OLGA, None, filters=Filters(), rate=dlq_bulk.FASTEST, clock=clock)
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    replay_many = replays.replay_many
    chunks = []

    def dies_at_the_second_chunk(ids, *args, **kwargs):
        if chunks:
            raise SystemExit("the worker was killed")  # not an Exception: nothing in the job records it
        chunks.append(ids)
        return replay_many(ids, *args, **kwargs)

    monkeypatch.setattr(replays, "replay_many", dies_at_the_second_chunk)
    job.delete()  # its worker had taken it from the queue
    with pytest.raises(SystemExit):
        paced_replay.run_replay(op.op_id, **{**job.kwargs, "slice_s": float("inf")}, clock=clock)
    monkeypatch.setattr(replays, "replay_many", replay_many)
    assert dlq_bulk.get(op.op_id).status == "running" and len(open_letters()) == 3

    clock.advance(paced_replay.STALL_S - 1)
    assert paced_replay.resume_stalled(clock) == []  # a slow chunk is not a dead worker
    clock.advance(2)
    assert paced_replay.resume_stalled(clock) == [op.op_id]
    (continued,) = Queue("maintenance", connection=get_redis()).jobs
    assert continued.kwargs["after_id"] == letters[2].id
    clock.advance(paced_replay.STALL_S + 1)
    assert paced_replay.resume_stalled(clock) == []  # its job waits for a worker: not continued twice
    assert run_unpaced(op.op_id) == "done" and open_letters() == []
    progress = dlq_bulk.get(op.op_id)
    assert (progress.done, progress.skipped, progress.failed) == (6, 0, 0)
    assert sorted(int(entry.target_id) for entry in replay_audits()) == [letter.id for letter in letters]


def test_a_stalled_replay_asked_to_stop_is_finished_as_stopped(app, clock):
    seed_history(2, 2, clock=clock)
    op = dlq_bulk.start_replay(OLGA, None, filters=Filters(), rate=5, clock=clock)
    for job in Queue("maintenance", connection=get_redis()).jobs:
        job.delete()
    get_redis().hset(dlq_bulk.KEY.format(op.op_id), "status", "stopping")
    clock.advance(paced_replay.STALL_S + 1)
    assert paced_replay.resume_stalled(clock) == []
    assert dlq_bulk.get(op.op_id).status == "stopped" and len(open_letters()) == 2
