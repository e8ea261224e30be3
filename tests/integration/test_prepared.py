"""Prepared statements write exactly what SQLAlchemy's execute() writes: types, JSON, defaults, rowcounts."""

from datetime import UTC, datetime

from sqlalchemy import bindparam, func, literal, select, update

from console.db.prepared import Prepared
from console.extensions import db
from console.models import Run, RunEvent
from console.services.actor import Actor
from console.services.engine import transitions
from console.services.engine.submit import submit
from console.services.people import tenants

AT = datetime(2026, 3, 2, 10, 5, 7, tzinfo=UTC)  # no microseconds: the case where formats differ


def test_an_event_row_matches_the_core_insert_including_defaults(app):
    run, _ = submit(tenants.find("default"), Actor("test"), handler="demo.noop")
    row = transitions.event_row(run_id=run.id, at=AT, kind="probe", attempt=2, series=1, next_retry_at=AT,
                                data={"delay_s": 1.5, "nested": [1, None]}, message="ü")
    connection = db.session.connection()
    connection.execute(transitions.INSERT_EVENT, row)
    Prepared(transitions.INSERT_EVENT, transitions.EVENT_COLUMNS).execute(connection, row)
    db.session.commit()
    core, prepared = db.session.execute(select(RunEvent).where(RunEvent.kind == "probe")
                                        .order_by(RunEvent.id)).scalars().all()
    columns = [c.key for c in RunEvent.__table__.columns if c.key != "id"]
    assert {c: getattr(prepared, c) for c in columns} == {c: getattr(core, c) for c in columns}
    # Stored alike too: SQL compares the stored text ("10:05:07" sorts before "10:05:07.000000").
    stored = db.session.execute(db.text("SELECT at, next_retry_at, data FROM run_events WHERE kind = 'probe' "
                                        "ORDER BY id")).all()
    assert stored[0] == stored[1]
    assert prepared.executions == 0 and prepared.next_retry_at == AT and prepared.data["nested"] == [1, None]


def test_an_update_reports_its_rowcount_so_a_guard_can_fail(app):
    run, _ = submit(tenants.find("default"), Actor("test"), handler="demo.noop")
    statement = Prepared(update(Run.__table__).where(Run.id == db.bindparam("run_id"),
                                                     Run.status == db.bindparam("expected"))
                         .values(status=db.bindparam("new"), updated_at=db.bindparam("at")))
    connection = db.session.connection()
    assert statement.execute(connection, {"run_id": run.id, "expected": "running", "new": "x", "at": AT}
                             ).rowcount == 0
    assert statement.execute(connection, {"run_id": run.id, "expected": "pending", "new": "cancelled", "at": AT}
                             ).rowcount == 1
    db.session.commit()
    db.session.expire_all()
    assert (run.status, run.updated_at) == ("cancelled", AT)


def test_a_constant_in_the_statement_is_bound_without_the_caller_giving_it(app):
    tenant = tenants.find("default")
    for _ in range(3):
        submit(tenant, Actor("test"), handler="demo.noop")
    db.session.execute(update(Run.__table__).where(Run.id == db.session.query(func.min(Run.id)).scalar_subquery())
                       .values(status="succeeded"))
    runs = Run.__table__
    waiting = select(func.count()).select_from(runs).where(
        runs.c.tenant_id == bindparam("tenant_id"), runs.c.status.in_([literal("pending"), literal("retry_wait")]))
    core = db.session.execute(waiting, {"tenant_id": tenant.id}).scalar_one()
    prepared = Prepared(waiting).execute(db.session.connection(), {"tenant_id": tenant.id}).scalar_one()
    assert core == prepared == 2
