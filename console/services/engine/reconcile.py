"""Repair drift between the database (the truth) and Redis (transport); nothing lost, nothing twice."""

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial

from rq import Queue
from rq.exceptions import NoSuchJobError
from sqlalchemy import and_, or_, select, update

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.errors import Failure
from console.domain.statuses import INTERRUPTED
from console.extensions import db
from console.models import Run
from console.redis_conn import get_redis
from console.services.engine import compensation, known_outcomes, queueing, transitions
from console.services.engine.failures import AFTER_FAILURE, fail
from console.services.policies import versions as policies
from console.services.settings import setting

log = logging.getLogger("rebound.reconcile")
BATCH = 500
TERMINAL = ("succeeded", "dead", "compensated", "cancelled", "failed", "compensation_failed", "resolved")


@dataclass
class Report:
    requeued: list[int] = field(default_factory=list)
    retries_enqueued: list[int] = field(default_factory=list)
    lost_workers: list[int] = field(default_factory=list)
    dropped_jobs: list[str] = field(default_factory=list)
    compensations_requeued: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {key: len(value) for key, value in self.__dict__.items()}


def _timeout(run: Run) -> int:
    return policies.effective(run.policy_id, run.policy_overrides)[1].timeout_s


def reconcile(clock: Clock = SYSTEM_CLOCK, *, dry_run: bool = False) -> Report:
    """Run every repair once and report what it did (with dry_run, what it would do, changing nothing)."""
    report = Report()
    now = clock()
    _requeue_pending(now, report, dry_run)
    _enqueue_due_retries(now, report, dry_run)
    _recover_lost_workers(now, report, dry_run)
    _drop_jobs_of_finished_runs(report, dry_run)
    _requeue_compensations(now, report, dry_run)
    if any(report.as_dict().values()) and not dry_run:
        log.warning("reconciled: %s", report.as_dict())
    return report


def _requeue_pending(now, report: Report, dry_run: bool = False) -> None:
    """Pending runs whose job Redis no longer holds, or that a worker took and never claimed, are queued again."""
    cutoff = now - timedelta(seconds=setting("REQUEUE_AFTER_S"))
    runs = db.session.execute(select(Run).where(Run.status == "pending", Run.enqueued_at <= cutoff)
                              .order_by(Run.id).limit(BATCH)).scalars().all()
    for run in runs:
        # A deferred run (window, capacity) waits on its deferral's job, named by when it is due.
        due = run.next_retry_at
        status, started_at = queueing.job_state(run.id, run.series, run.attempt, due)
        if status in ("queued", "scheduled"):
            continue
        # A worker claims a run the moment it takes its job: one taken long ago with the run still pending was
        # taken by a worker that died first (its database down, killed). RQ frees such jobs only in its own
        # cleanup, every 10 minutes; a second delivery is harmless (the claim is guarded).
        if status == "started" and (started_at is None or started_at > cutoff):
            continue
        if dry_run:
            report.requeued.append(run.id)
            continue
        # Still as read? A worker may have taken its job, claimed it and even finished it since the batch was read
        # (a backlog's runs are due by the hundred): its job then reads finished, which is no missing job. One
        # guarded write, committed before the job is queued, so a claim never waits on this pass (helper 170: 557
        # finished runs had "requeued · job missing" on their timeline, and their jobs were queued twice).
        if not _still_waiting(run, due, cutoff, now):
            db.session.rollback()
            continue
        transitions.event(run, "requeued", now, reason="job_abandoned" if status == "started" else "job_missing")
        db.session.commit()
        report.requeued.append(run.id)
        if status == "started":
            queueing.release_abandoned(run.id, run.series, run.attempt, due)
        if due is not None and due > now:
            queueing.enqueue_at(due, run.id, run.series, run.attempt, _timeout(run), deferral=True)
        else:
            queueing.enqueue_now(run.id, run.series, run.attempt, _timeout(run))


def _still_waiting(run: Run, due, cutoff, now) -> bool:
    """Mark the run queued again now if it is still the pending attempt read, waiting on the same job; tell whether
    it was (a deferral since moved its job to another due time; a claim made it running)."""
    runs = Run.__table__.c
    return db.session.execute(update(Run.__table__).where(
        runs.id == run.id, runs.status == "pending", runs.series == run.series, runs.attempt == run.attempt,
        runs.next_retry_at.is_not_distinct_from(due), runs.enqueued_at <= cutoff,
    ).values(enqueued_at=now)).rowcount == 1


def _enqueue_due_retries(now, report: Report, dry_run: bool = False) -> None:
    """Retries overdue by a few seconds are queued now: their job is gone, or no scheduler moves it.

    RQ's scheduler runs inside one worker and holds its lock for a minute after that worker dies;
    a duplicate delivery that this may cause is a no-op (the claim is conditional).
    """
    runs = db.session.execute(select(Run).where(Run.status == "retry_wait", Run.next_retry_at <= now - timedelta(
        seconds=5)).order_by(Run.next_retry_at).limit(BATCH)).scalars().all()
    for run in runs:
        # A breaker's deferral has a job id of its own; the one queued here has the attempt's plain id, so both are
        # asked (asking the deferral's only queued the same job again every 30 s while no worker ran).
        deferred_to = run.next_retry_at if run.status_reason == "breaker_open" else None
        statuses = {queueing.job_status(run.id, run.series, run.attempt, moment) for moment in {deferred_to, None}}
        if not statuses & {"queued", "started"}:
            report.retries_enqueued.append(run.id)
            if not dry_run:
                queueing.enqueue_now(run.id, run.series, run.attempt, _timeout(run), queue=queueing.RETRY_QUEUE)
                # Its job still scheduled, past its time, is not missing: no scheduler moved it (RQ's was down).
                transitions.event(run, "requeued", now,
                                  reason="retry_overdue" if "scheduled" in statuses else "retry_job_missing")
    if not dry_run:
        db.session.commit()


def _recover_lost_workers(now, report: Report, dry_run: bool = False) -> None:
    """Running runs whose heartbeat stopped (their worker died) go through the retryable path."""
    cutoff = now - timedelta(seconds=setting("STALE_AFTER_S"))
    runs = db.session.execute(select(Run).where(Run.status == "running", Run.heartbeat_at <= cutoff)
                              .order_by(Run.id).limit(BATCH)).scalars().all()
    stopped = queueing.asked_to_stop({run.worker_id for run in runs if run.worker_id}) if runs else set()
    for run in runs:
        if dry_run:
            report.lost_workers.append(run.id)
            continue
        known = known_outcomes.recall(run.id, run.attempt)
        if known is not None:
            # Its worker knew how the handler ended but could not write it: record that outcome (a failure as any
            # is, so a retry is a new attempt its policy asks for), or park it; never run this attempt again.
            try:
                if known["code"] == known_outcomes.SUCCEEDED:
                    known_outcomes.record_success(run, known, now)
                elif known.get("then") == known_outcomes.FAIL:
                    # Its handler failed while the database did not answer: the failure goes the way any does.
                    known_outcomes.record_failure(run, known, now)
                else:
                    failure = Failure(code=known["code"], message=known["message"], retryable=False)
                    known_outcomes.park_for_a_person(run, failure, now)
            except transitions.StaleRun:
                continue
            known_outcomes.forget(run.id, run.attempt)
            report.lost_workers.append(run.id)
            continue
        if run.worker_id in stopped:
            # Asked to stop (a restart, a deploy) and killed at the end of its grace: the attempt did not fail, and
            # runs again as it was; counted a failure, a run allowed one attempt died of a restart (helper 162).
            try:
                _run_again(run, now)
            except transitions.StaleRun:
                continue
            report.lost_workers.append(run.id)
            continue
        policy = policies.effective(run.policy_id, run.policy_overrides)[1]
        failure = Failure(code="worker_lost", retryable=True,
                          message=f"worker {run.worker_id} stopped sending heartbeats during attempt {run.attempt}")
        try:
            fail(run, failure, policy, now)
            report.lost_workers.append(run.id)
        except transitions.StaleRun:
            continue  # it finished after all


def _run_again(run: Run, now) -> None:
    """Queue again, as the same attempt, a run whose worker was stopped during it (no attempt is spent)."""
    # A claim counts the attempt it starts: the count goes back one, so the next claim starts this one again, under
    # the job id it was queued with (the abandoned job's, taken out of RQ's started registry first).
    before = run.attempt - 1
    transitions.move(run, "retry_wait", now, reason=INTERRUPTED, next_retry_at=now, attempt=before,
                     message=f"its worker {run.worker_id} was stopped (a restart or a deploy) during attempt "
                             f"{run.attempt}, which runs again from its start; no attempt is spent")
    db.session.commit()
    queueing.release_abandoned(run.id, run.series, before)
    queueing.enqueue_now(run.id, run.series, before, _timeout(run), queue=queueing.RETRY_QUEUE)


def _drop_jobs_of_finished_runs(report: Report, dry_run: bool = False) -> None:
    """Jobs whose run already finished are removed: queued ones, so no worker wakes for nothing; and those RQ keeps as
    failed (their bookkeeping crashed, in a database outage say) once the reconciler has seen their run through, so
    Queues & workers' "Failed in RQ" counts what is still wrong, not a day of outages since recovered."""
    connection = get_redis()
    for name in (queueing.RUN_QUEUE, queueing.RETRY_QUEUE):
        queue = Queue(name, connection=connection)
        for held, remove in ((queue.get_job_ids(0, BATCH * 4), queue.remove),
                             # cleanup=False: RQ's own maintenance expires its entries; a dry run changes nothing
                             (queue.failed_job_registry.get_job_ids(0, BATCH * 4 - 1, cleanup=False),
                              partial(_drop_registered, queue.failed_job_registry)),
                             # A delayed retry of a run pulled forward (Retry now, a bulk retry) or cancelled since:
                             # Queues counted it "delayed, in 10 min" after its run had ended (helper 160).
                             (queue.scheduled_job_registry.get_job_ids(0, BATCH * 4 - 1, cleanup=False),
                              partial(_drop_registered, queue.scheduled_job_registry))):
            for job_id in _of_finished_runs(held):
                if not dry_run:
                    remove(job_id)
                report.dropped_jobs.append(job_id)


def _drop_registered(registry, job_id: str) -> None:
    """Take a job out of one of RQ's registries (failed, scheduled), and delete it; one whose record RQ lost in part
    goes from the registry all the same (its hash expires with RQ's own TTL)."""
    try:
        registry.remove(job_id, delete_job=True)
    except (ValueError, NoSuchJobError) as partial_record:
        # A worker killed mid-job left an entry whose execution record had expired: RQ raised "Execution … not found
        # in Redis", and the whole pass stopped before its compensations (helper 162).
        registry.remove(job_id)
        log.info("job %s dropped from RQ's %s; its record was incomplete (%s)", job_id, registry.key, partial_record)


def _of_finished_runs(job_ids: list[str]) -> list[str]:
    """Return the job ids, of these, whose run has finished."""
    parsed = {job_id: queueing.parse_job_id(job_id) for job_id in job_ids}
    ids = {value[0] for value in parsed.values() if value}
    if not ids:
        return []
    finished = set(db.session.execute(select(Run.id).where(Run.id.in_(ids), Run.status.in_(TERMINAL))).scalars())
    return [job_id for job_id, value in parsed.items() if value and value[0] in finished]


def _requeue_compensations(now, report: Report, dry_run: bool = False) -> None:
    """Compensations nobody runs are queued as their own job.

    Those asked for whose job Redis lost (or that failed outright), and those a worker ran after a failed
    attempt and died during (their heartbeat stopped).
    """
    cutoff = now - timedelta(seconds=setting("REQUEUE_AFTER_S"))
    stale = now - timedelta(seconds=setting("STALE_AFTER_S"))
    worker_lost = and_(Run.status_reason == AFTER_FAILURE, or_(Run.heartbeat_at.is_(None), Run.heartbeat_at <= stale))
    runs = db.session.execute(select(Run).where(Run.status == "compensating", Run.updated_at <= cutoff,
                                                or_(Run.status_reason.in_(compensation.ASKED), worker_lost))
                              .order_by(Run.id).limit(BATCH)).scalars().all()
    for run in runs:
        status, started_at = compensation.job_state(run.id)
        if status == "queued":
            continue
        # A job a worker took long ago whose undo has not beaten since (its first beat is at its start) was taken
        # by a worker that died: RQ still calls it started until its own cleanup, 10 minutes on (helper 160).
        if status == "started" and (started_at is None or started_at > stale
                                    or (run.heartbeat_at is not None and run.heartbeat_at > stale)):
            continue
        report.compensations_requeued.append(run.id)
        if dry_run:
            continue
        if status == "started":
            compensation.release_abandoned(run.id)
        compensation.enqueue(run.id)
        transitions.event(run, "requeued", now, reason="compensation_job_missing"
                          if run.status_reason in compensation.ASKED and status != "started"
                          else "compensation_worker_lost")
    if not dry_run:
        db.session.commit()
