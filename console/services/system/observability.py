"""What /metrics serves: the counters every process wrote to Redis, and gauges read at scrape time."""

import logging
import math
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from rq import Queue
from rq.registry import ScheduledJobRegistry
from sqlalchemy import func, select

from console import metrics
from console.extensions import db
from console.models import DeadLetter, Run, Task, Tenant
from console.redis_conn import get_redis
from console.services.engine.queueing import QUEUES
from console.services.policies import versions as policies
from console.services.system import leader

log = logging.getLogger("rebound.metrics")
ON_TIME_WINDOW_S = 3600
DEFAULT_START_DELAY_S = 60


def running_by_tenant() -> dict[int, int]:
    """Return how many runs are running now, per tenant id."""
    return dict(db.session.execute(select(Run.tenant_id, func.count()).where(Run.status == "running")
                                   .group_by(Run.tenant_id)).all())


def open_dead_letters_by_tenant() -> dict[int, int]:
    """Return how many dead letters wait for a person now (open), per tenant id."""
    return dict(db.session.execute(select(DeadLetter.tenant_id, func.count()).where(DeadLetter.status == "open")
                                   .group_by(DeadLetter.tenant_id)).all())


def queue_depths() -> list[tuple[str, str, int]]:
    """Return (queue, state, jobs) for each worker queue: jobs ready now and delayed ones."""
    connection = get_redis()
    rows = []
    for name in QUEUES:
        queue = Queue(name, connection=connection)
        rows.append((name, "queued", queue.count))
        rows.append((name, "scheduled", ScheduledJobRegistry(queue=queue).get_job_count(cleanup=False)))
    return rows


def start_punctuality(now: datetime, window_s: int, limit_s: int | None = None) -> tuple[int, int]:
    """Return (late, due) for task runs scheduled in the window whose start is decided by now.

    A run is due once it started or once its start limit passed; it is late if it started (or is still
    waiting) more than the limit after it was due (due_at, else scheduled_for). The limit is limit_s, else the task's
    max_start_delay_s (its SLA, then its policy's), else 60 s. Cancelled runs (mutex `forbid`) do not count.
    """
    since = now - timedelta(seconds=window_s)
    # created_at is indexed and never earlier than scheduled_for, so it bounds the scan.
    rows = db.session.execute(select(Run.task_id, Run.scheduled_for, Run.due_at, Run.started_at).where(
        Run.created_at >= since, Run.task_id.is_not(None), Run.scheduled_for >= since, Run.scheduled_for <= now,
        Run.status != "cancelled")).all()
    limits = _start_limits({row.task_id for row in rows}) if limit_s is None and rows else {}
    late = due = 0
    for task_id, scheduled_for, due_at, started_at in rows:
        # Due when its window opened or its jitter offset passed, as the SLA check and Reports read it.
        scheduled_for = due_at or scheduled_for
        limit = timedelta(seconds=limit_s or limits.get(task_id) or DEFAULT_START_DELAY_S)
        if started_at is None and now <= scheduled_for + limit:
            continue  # may still start on time
        due += 1
        late += (started_at or now) > scheduled_for + limit
    return late, due


def _start_limits(task_ids: set[int]) -> dict[int, int | None]:
    limits, seen = {}, {}
    for task in db.session.execute(select(Task).where(Task.id.in_(task_ids))).scalars():
        key = (task.policy_id, str(task.policy_overrides or {}))
        if key not in seen:
            seen[key] = policies.effective(task.policy_id, task.policy_overrides)[1].max_start_delay_s
        limits[task.id] = (task.sla or {}).get("max_start_delay_s", seen[key])
    return limits


class _Collector:
    """One scrape's worth of families: stored counters first, then the gauges read now."""

    def __init__(self, now: datetime):
        self.now = now
        # Cleared at the first Redis read that fails: a frozen Redis then costs a scrape one timeout, not three,
        # inside Prometheus's default 10 s scrape timeout.
        self.redis_answers = True

    def collect(self):
        tenants = {str(k): v for k, v in db.session.execute(select(Tenant.id, Tenant.name)).all()}
        try:
            stored = metrics.snapshot()
        except Exception as error:  # noqa: BLE001 - the database gauges are still worth serving
            log.warning("metrics: cannot read the counters from Redis (%s)", error)
            stored, self.redis_answers = {}, False
        for metric in metrics.REGISTRY.values():
            yield _family(metric, stored.get(metric.name, {}), tenants)
        yield from self._gauges(tenants)

    def _gauges(self, tenants: dict[str, str]):
        depth = GaugeMetricFamily("worker_queue_depth", "Jobs in each RQ queue: queued (ready) or scheduled "
                                  "(delayed retries).", labels=["queue", "state"])
        try:
            for name, state, count in queue_depths() if self.redis_answers else ():
                depth.add_metric([name, state], count)
        except Exception as error:  # noqa: BLE001 - Redis down: the family stays, without samples
            log.warning("metrics: cannot read queue depths (%s)", error)
            self.redis_answers = False
        yield depth
        # Held only while a scheduler renews it (every 3 s, lapsing after REBOUND_LEADER_TTL_S): a frozen or dead
        # scheduler fires no cron and shows nowhere else, as the on-time rate counts only runs that were created.
        leading = GaugeMetricFamily("scheduler_leader", "1 while a scheduler process holds the leader lock and "
                                    "fires the cron tasks, 0 while none does: alert on 0 for a minute.")
        leads = leader.anyone_leads(get_redis()) if self.redis_answers else None
        if leads is None:  # Redis down: unknown, not "no leader"
            log.warning("metrics: cannot read the scheduler leader (Redis did not answer)")
        else:
            leading.add_metric([], 1 if leads else 0)
        yield leading
        inuse = GaugeMetricFamily("worker_pool_concurrency_inuse", "Runs running now, per tenant.",
                                  labels=["tenant"])
        parked = GaugeMetricFamily("dead_letters_open", "Dead letters waiting for a person now (open), per tenant.",
                                   labels=["tenant"])
        running, waiting = running_by_tenant(), open_dead_letters_by_tenant()
        for tenant_id, name in sorted(tenants.items(), key=lambda item: item[1]):
            inuse.add_metric([name], running.get(int(tenant_id), 0))
            parked.add_metric([name], waiting.get(int(tenant_id), 0))
        yield inuse
        yield parked
        late, due = start_punctuality(self.now, ON_TIME_WINDOW_S)
        rate = GaugeMetricFamily("task_scheduler_on_time_rate",
                                 "Share of task runs scheduled in the last hour that started within their "
                                 "max_start_delay_s (60 s if none); NaN when none was due.")
        rate.add_metric([], (due - late) / due if due else math.nan)
        yield rate


def _family(metric, fields: dict[str, float], tenants: dict[str, str]):
    def names(labels: str) -> list[str]:
        values = labels.split(metrics.SEP) if metric.labels else []
        return [tenants.get(v, v) if label == metrics.TENANT else v for label, v in zip(metric.labels, values,
                                                                                          strict=True)]

    if metric.kind == "counter":
        family = CounterMetricFamily(metric.name, metric.documentation, labels=list(metric.labels))
        for labels, value in sorted(fields.items()):
            family.add_metric(names(labels), value)
        return family
    family = HistogramMetricFamily(metric.name, metric.documentation, labels=list(metric.labels))
    series: dict[str, dict[str, float]] = {}
    for key, value in fields.items():
        labels, _, part = key.rpartition(metrics.SEP)
        series.setdefault(labels, {})[part] = value
    for labels, parts in sorted(series.items()):
        running, buckets = 0.0, []
        for index, bound in enumerate(metric.buckets):
            running += parts.get(f"b{index}", 0)
            buckets.append((_bound(bound), running))
        buckets.append(("+Inf", parts.get("count", 0)))
        family.add_metric(names(labels), buckets, sum_value=parts.get("sum", 0))
    return family


def _bound(value: float) -> str:
    return str(float(value))


def exposition(now: datetime) -> bytes:
    """Render every metric in the Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(now))
    return generate_latest(registry)
