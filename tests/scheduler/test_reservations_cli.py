"""`rebound reservations list|reserve|cancel`: the API's reservations from the command line, audited as cli."""

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry, Reservation
from tests.factories import make_tenant


def _at(hours: float) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _reserve(runner, tenant="acme", slots="3", start=1.0, end=5.0, *extra):
    return runner.invoke(args=["reservations", "reserve", tenant, "--running-slots", slots, "--starts-at", _at(start),
                               "--ends-at", _at(end), "--reason", "month-end batch", *extra])


def _stored() -> list[Reservation]:
    db.session.expire_all()
    return db.session.execute(select(Reservation).order_by(Reservation.id)).scalars().all()


def test_reserve_list_and_cancel_from_the_command_line(app):
    make_tenant("acme")
    make_tenant("globex")
    runner = app.test_cli_runner()
    assert runner.invoke(args=["reservations", "list"]).output == "no capacity reserved (now or later)\n"
    made = _reserve(runner, "acme", "3", 1, 5, "--queued-runs", "500")
    assert made.exit_code == 0, made.output
    [row] = _stored()
    assert made.output == (f"Reserved 3 running slots and 500 queued runs for acme from {row.starts_at.isoformat()} "
                           f"to {row.ends_at.isoformat()} (reservation {row.id}).\n")
    assert (row.running_slots, row.queued_runs, row.created_by) == (3, 500, "cli")
    assert _reserve(runner, "globex", "2").exit_code == 0
    listed = runner.invoke(args=["reservations", "list"]).output.splitlines()
    assert listed[0].split() == ["id", "tenant", "running_slots", "queued_runs", "starts_at", "ends_at", "reason",
                                 "created_by"]
    assert [line.split()[1] for line in listed[1:]] == ["acme", "globex"]
    only = runner.invoke(args=["reservations", "list", "--tenant", "globex", "--json"])
    assert [r["tenant"] for r in json.loads(only.output)] == ["globex"]

    cancelled = runner.invoke(args=["reservations", "cancel", str(row.id)])
    assert cancelled.exit_code == 0
    assert cancelled.output == f"Cancelled reservation {row.id} of acme: its 3 running slots are free now.\n"
    typo = runner.invoke(args=["reservations", "cancel", "abc"])  # a usage error, not "no reservation abc"
    assert typo.exit_code == 2 and "RESERVATION_ID" in typo.output and "no reservation" not in typo.output
    after = runner.invoke(args=["reservations", "list"]).output.splitlines()[1:]
    assert [line.split()[1] for line in after] == ["globex"]
    past = runner.invoke(args=["reservations", "list", "--all"]).output
    assert "cancelled_at" in past.splitlines()[0] and "acme" in past
    actions = db.session.execute(select(AuditEntry.action, AuditEntry.actor).where(
        AuditEntry.action.like("capacity.%")).order_by(AuditEntry.seq)).all()
    assert actions == [("capacity.reserve", "cli"), ("capacity.reserve", "cli"), ("capacity.cancel", "cli")]


def test_a_refusal_exits_non_zero_says_why_and_writes_nothing(app):
    make_tenant("acme")
    make_tenant("globex")
    runner = app.test_cli_runner()
    assert _reserve(runner, "globex", "90").exit_code == 0
    over = _reserve(runner, "acme", "20")
    assert over.exit_code == 1
    assert "Error: refused (conflict, 409): over-reservation: between" in over.output
    assert "(by globex); 10 are free then. Ask for at most 10 or choose another range." in over.output
    backwards = _reserve(runner, "acme", "1", 5, 1)
    assert backwards.exit_code == 1 and "refused (invalid, 422): --ends-at (" in backwards.output
    no_zone = runner.invoke(args=["reservations", "reserve", "acme", "--running-slots", "1", "--starts-at",
                                  "2030-01-01T10:00", "--ends-at", "2030-01-01T12:00", "--reason", "x"])
    assert no_zone.exit_code == 1 and "--starts-at needs a time zone (end it with Z for UTC)" in no_zone.output
    unknown = _reserve(runner, "initech", "1")
    assert unknown.exit_code == 1 and "refused (invalid, 422): no tenant named 'initech'" in unknown.output
    assert len(_stored()) == 1
    assert runner.invoke(args=["reservations", "cancel", "999"]).exit_code == 1
    listed = runner.invoke(args=["reservations", "list", "--tenant", "initech"])
    assert listed.exit_code == 1 and "no tenant named 'initech'" in listed.output
    cancel = runner.invoke(args=["reservations", "cancel", str(_stored()[0].id)])
    again = runner.invoke(args=["reservations", "cancel", str(_stored()[0].id)])
    assert cancel.exit_code == 0 and again.exit_code == 1 and "was cancelled already" in again.output
