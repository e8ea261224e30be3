"""Demo data, so a fresh console has something to look at: tenants and a realistic mix of runs."""

from datetime import timedelta

from sqlalchemy import func, select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Run, Task, Tenant
from console.services.actor import DEMO
from console.services.engine.submit import submit
from console.services.policies import versions as policies
from console.services.recovery import runbooks
from console.services.recovery.workflows.submit import submit as submit_workflow
from console.services.scheduling import tasks
from console.services.system import demo_roles

# Short delays so the demo's retries and dead letters appear within seconds of `rebound up`.
# The breaker is lenient so the demo's deliberate failures fill the DLQ instead of tripping it, and counted per
# tenant: on the handler's shared breaker they were failures in a row to the default policy, whose threshold of 5
# the README's first example (demo.flaky, default policy) then reached on its first failure (helper 126).
DEMO_POLICY = {"description": "Demo: three quick attempts.", "max_attempts": 3, "base_delay_s": 1,
               "multiplier": 2, "max_delay_s": 5, "jitter": 0.1, "timeout_s": 300,
               "breaker_scope": "handler_and_tenant",
               "breaker": {"failure_threshold": 50, "open_s": 20, "success_threshold": 2}}


def is_empty() -> bool:
    """Tell whether nothing has been registered or run yet."""
    tasks = db.session.execute(select(func.count()).select_from(Task)).scalar_one()
    return tasks == 0 and db.session.execute(select(func.count()).select_from(Run)).scalar_one() == 0


def is_seeded() -> bool:
    """Tell whether the demo's tasks are here already (a second seed would register them twice)."""
    tenant_name, body = DEMO_TASKS[0]
    return db.session.execute(select(func.count()).select_from(Task).join(Tenant).where(
        Tenant.name == tenant_name, Task.name == body["name"], Task.deleted_at.is_(None))).scalar_one() > 0


def _tenant(name: str, max_running: int, max_queued: int) -> Tenant:
    tenant = db.session.execute(select(Tenant).where(Tenant.name == name)).scalar_one_or_none()
    if tenant is None:
        tenant = Tenant(name=name, max_running=max_running, max_queued=max_queued)
        db.session.add(tenant)
        db.session.commit()
    return tenant


def seed(roles: bool = False) -> str:
    """Create demo tenants and submit a mix of runs that succeed, recover, compensate or die.

    With `roles`, a report history and a waiting data fix come first, so the live tasks and runs are the newest ids.
    """
    spec = dict(DEMO_POLICY)
    policies.save("demo", spec, DEMO, description=spec.pop("description"))
    acme, globex = _tenant("acme", 20, 500), _tenant("globex", 10, 200)
    plan = [
        (acme, "demo.noop", {}, 12),
        (globex, "demo.noop", {}, 8),
        (acme, "demo.flaky", {"fail_times": 1, "message": "lock wait timeout on ledger row"}, 4),
        (globex, "demo.flaky", {"fail_times": 2, "code": "http_503", "message": "inventory service unavailable"}, 2),
        (acme, "demo.flaky", {"fail_times": 9, "code": "http_502",
                              "message": "payments-gateway answered 502 for order {n}"}, 4),
        (globex, "demo.flaky", {"fail_times": 9, "error": "fatal", "code": "invalid_account",
                                "message": "account {n} is closed"}, 3),
        # Fails its first three executions: dead after one series, recovers when replayed.
        (acme, "demo.flaky", {"fail_times": 4, "code": "http_504",
                              "message": "search index timed out on shard {n}"}, 2),
        (acme, "demo.flaky_compensated", {"fail_times": 1, "error": "fatal", "code": "stock_mismatch",
                                          "message": "reserved stock does not match order {n}"}, 2),
        (globex, "demo.sleep", {"seconds": 90}, 1),
    ]
    history = demo_roles.seed() + "\n" if roles else ""
    _tasks(acme, globex)  # after the history's paused tasks: the Tasks list, newest first, opens on the live ones
    count = 0
    for tenant, handler, params, times in plan:
        for n in range(times):
            filled = {k: v.format(n=1000 + n) if isinstance(v, str) else v for k, v in params.items()}
            submit(tenant, DEMO, handler=handler, params=filled, policy="demo", source="demo")
            count += 1
    refunds_back = (utcnow() + REFUNDS_DOWN).isoformat()
    for order, shipping, refunds_down in DEMO_WORKFLOWS:
        submit_workflow(acme, DEMO, name=f"ship order {order}", idempotency_key=f"demo-order-{order}",
                        steps=_order_steps(order, shipping, refunds_back if refunds_down else None))
    # A dry-run changes nothing: Runbooks shows what a real run would replay, and the way to run it.
    runbooks.start("replay_dead_letters", {"code": "http_502"}, DEMO, scope=None, dry_run=True,
                   reason="Demo: which of the payments gateway's 502s would a replay touch?")
    return (f"{history}Demo data: tenants acme and globex, {len(DEMO_TASKS)} scheduled tasks, {count} runs submitted "
            f"(some will retry, some will die), {len(DEMO_WORKFLOWS)} workflows (one undone, one stopped for a "
            "person), a runbook dry-run.")


# Three sagas, so Workflows shows one that went through, one whose last step failed for good (its steps undone in
# reverse order), and one whose card charge cannot be refunded while the refund service is down: its undo stops
# there for a person, who retries it on the run's page once the service is back (REFUNDS_DOWN after the seeding).
# (order, how its shipping step goes, whether refunds are down).
REJECTED = {"fail_times": 9, "error": "fatal", "code": "carrier_rejected"}
DEMO_WORKFLOWS = [
    (1001, {"fail_times": 0}, False),
    (1002, {**REJECTED, "message": "carrier rejected parcel for order 1002: no such street"}, False),
    (1003, {**REJECTED, "message": "carrier rejected parcel for order 1003: address incomplete"}, True),
]
REFUNDS_DOWN = timedelta(minutes=10)


def _order_steps(order: int, shipping: dict, refunds_back: str | None = None) -> list[dict]:
    """Reserve the stock, charge the card, ship: the first two have a compensation that undoes them."""
    charge = {"fail_times": 0, "step": f"charge the card for {order}"}
    return [{"handler": "demo.flaky_compensated", "params": {"fail_times": 0, "step": f"reserve stock for {order}"},
             "policy": "demo"},
            {"handler": "demo.flaky_compensated",
             "params": {**charge, "undo_down_until": refunds_back} if refunds_back else charge, "policy": "demo"},
            {"handler": "demo.flaky", "params": {**shipping, "step": f"ship order {order}"}, "policy": "demo"}]


# Scheduled tasks, so Tasks, the conflict forecast and the run pages show something real from the first minute:
# one every minute, one nightly that fires before its window opens (so it waits for it), and two that share a
# mutex key at :00 and :30 (the second is skipped while the first runs).
DEMO_TASKS = [
    ("acme", {"name": "heartbeat-ping", "handler": "demo.noop", "cron": "* * * * *", "policy": "demo"}),
    ("acme", {"name": "nightly-ledger-close", "handler": "demo.sleep", "params": {"seconds": 5},
              "cron": "30 23 * * *", "window": {"start": "00:00", "end": "05:00"}, "policy": "demo"}),
    ("globex", {"name": "export-orders", "handler": "demo.sleep", "params": {"seconds": 40}, "cron": "*/15 * * * *",
                "mutex_key": "orders-db", "policy": "demo"}),
    ("globex", {"name": "reindex-orders", "handler": "demo.sleep", "params": {"seconds": 20}, "cron": "*/30 * * * *",
                "mutex_key": "orders-db", "concurrency_policy": "forbid", "policy": "demo"}),
]


def _tasks(*tenants) -> None:
    by_name = {tenant.name: tenant for tenant in tenants}
    for tenant, body in DEMO_TASKS:
        tasks.register(by_name[tenant], {"timezone": "UTC", **body}, DEMO)
