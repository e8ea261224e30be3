"""The queries run on every submit, attempt and console page find their runs and dead letters by the indexes meant
for them, partial ones included, on SQLite and PostgreSQL: a query that would scan the runs table is a regression."""

from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import event, select

from console.extensions import db
from console.models import DeadLetter, Run
from console.services import people
from console.services.dlq.filters import Filters, where
from console.services.engine import admission, submit
from console.services.reports import figures, overview
from console.services.reports.read import Scope
from console.services.runs import query as runs_query
from console.services.system.demo_history import seed_history


@contextmanager
def captured():
    """Collect the statements the ORM sends (with their parameters), to explain them afterwards."""
    seen = []

    def note(_conn, _cursor, statement, parameters, _context, _many):
        if " runs" in statement or "dead_letters" in statement:
            seen.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", note)


def plan(statement: str, parameters=None) -> str:
    """Return the database's plan for a statement, as one string."""
    connection = db.session.connection()
    if db.engine.dialect.name == "sqlite":
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters or ())
        return " | ".join(str(row[-1]) for row in rows)
    # Tables of a test are tiny: with sequential scans priced out the plan shows which indexes could serve.
    connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
    rows = connection.exec_driver_sql(f"EXPLAIN {statement}", parameters or {})
    return " | ".join(str(row[0]) for row in rows)


def compiled(statement, **values) -> tuple[str, object]:
    """Compile a Core statement for this database with its parameters, as the driver receives them."""
    form = statement.compile(dialect=db.engine.dialect)
    parameters = form.construct_params(values)
    if form.positional:
        return str(form), tuple(parameters[name] for name in form.positiontup)
    return str(form), parameters


def scans_runs(found: str) -> bool:
    return bool(("SCAN runs" in found and "USING" not in found.split("SCAN runs")[1][:30])
                or "Seq Scan on runs" in found or "Seq Scan on dead_letters" in found)


def uses(index: str, found: str) -> bool:
    """Tell whether the plan reads this index; on PostgreSQL, whether it reads any instead of the table.

    SQLite picks its index by the query's terms, so its choice is the one the console gets at scale. PostgreSQL picks
    by costs, which on a test's few rows say nothing about a million; there a partial index chosen at all shows its
    predicate was proven, and no sequential scan shows every query has an index to go by.
    """
    if db.engine.dialect.name == "sqlite":
        return index in found
    return not scans_runs(found)


def test_a_submits_waiting_counts_read_the_live_runs_indexes(app):
    for by_task, values in ((True, {"task_id": 1}), (False, {"handler": "demo.noop"})):
        found = plan(*compiled(submit._WAITING[by_task].statement, tenant_id=1, **values))
        # Both counts (the task's or handler's, and the tenant's) are within the tenant.
        assert uses("ix_runs_live_tenant_status", found) and not scans_runs(found), found


def test_an_attempts_running_counts_read_the_live_runs_indexes(app, clock):
    found = plan(*compiled(admission._run_and_admission(), run_id=1, now=clock()))
    for index in ("ix_runs_live_handler_status", "ix_runs_live_task_status", "ix_runs_live_tenant_status"):
        assert uses(index, found), found
    assert not scans_runs(found), found


def test_the_consoles_counts_and_lists_find_their_indexes(app, clock):
    with captured() as seen:
        people.tenants.usage(None)
        figures.late_waiting(Scope(tenant_id=1), clock())
        overview.counters(1, clock)
        runs_query.apply(select(Run.id), runs_query.RunFilters(statuses=("pending",)), 1)
    plans = [plan(statement, parameters) for statement, parameters in seen]
    assert len(plans) >= 4
    assert not any(scans_runs(found) for found in plans), plans
    assert sum(uses("ix_runs_live_tenant_status", found) for found in plans) >= 3, plans
    assert any(uses("ix_runs_status_finished_at", found) for found in plans), plans


@pytest.mark.parametrize("filters, index", [
    (runs_query.RunFilters(error_code="HTTP_502"), "ix_runs_error_code_lower_id"),
    (runs_query.RunFilters(task_id=1), "ix_runs_task_id_id"),
])
def test_partial_indexes_serve_the_runs_lists(app, filters, index):
    query = runs_query.apply(select(Run.id), filters, None).order_by(Run.id.desc()).limit(25)
    found = plan(*compiled(query))
    assert uses(index, found), found


@pytest.mark.parametrize("statuses", [("cancelled",), ("failed",)])
def test_a_tenants_runs_in_a_rare_status_are_found_by_their_index_not_by_walking_the_tenants_runs(app, statuses):
    # Without it, a tenant's list filtered to a status none of its 330,000 runs had read them all (0.42 s warm). With
    # two statuses SQLite still walks the tenant's runs in id order rather than sort (it has no statistics).
    with captured() as seen:
        runs_query.page(runs_query.RunFilters(statuses=statuses), scope=2)
    (found,) = [plan(statement, parameters) for statement, parameters in seen]
    assert uses("ix_runs_rare_tenant_status_id", found) and not scans_runs(found), found


def test_open_letters_are_counted_and_grouped_by_their_indexes(app, clock):
    count = select(DeadLetter.id).where(DeadLetter.work_order_id == 1, DeadLetter.status == "open")
    assert uses("ix_dead_letters_open_work_order_id", plan(*compiled(count)))
    group = where(select(DeadLetter.id), Filters(group="abc"), None, clock()).order_by(DeadLetter.id.desc()).limit(26)
    found = plan(*compiled(group))
    # On a test's near-empty tables SQLite weighs this partial index and the status index as equals (both give id
    # order) and its pick changed with what else the process had collected; on the 1M-run file it takes the partial
    # one (docs/benchmarks.md, session 11). Here: one of the two, no sort, no scan.
    assert (uses("ix_dead_letters_open_fingerprint", found) or uses("ix_dead_letters_status_id", found)), found
    assert "TEMP B-TREE" not in found and not scans_runs(found), found



def test_a_handlers_runs_without_a_task_from_a_reports_row_are_found_by_the_tenant_or_period_index(app, clock):
    # The link of a Reports row "handler (no task)": a tenant, a period, the handler. No index holds finished runs by
    # handler (one would cost every submit), so the tenant's or the period's index bounds the walk, as for the
    # Reports' other run links (SQLite takes the tenant's and sorts by created_at; PostgreSQL walks created_at).
    filters = runs_query.RunFilters(tenant_id=1, handler="python:demo.flaky", created_from=clock(),
                                    created_to=clock() + timedelta(days=1), failed=True)
    with captured() as seen:
        runs_query.page(filters, scope=None)
        runs_query.count(filters, scope=None)
    plans = [plan(statement, parameters) for statement, parameters in seen]
    assert plans and not any(scans_runs(found) for found in plans), plans
    assert all(uses("ix_runs_created_at", found) or uses("ix_runs_tenant_id_id", found) for found in plans), plans


def test_a_pages_timelines_are_read_by_run_not_through_every_event_of_a_kind(app, clock):
    """SQLite read a page of dead runs' timelines through the (kind, at) index, every `succeeded` event there is:
    0.4 s a Runs page filtered to dead at 300,000 runs (helper 129). Statistics would steer it (ANALYZE), but a
    connection reads them only when it opens, and the console's live for days: the query says it instead."""
    seed_history(400, 100, clock)
    with captured() as seen:
        assert runs_query.page(runs_query.RunFilters(statuses=("dead",)), scope=None).runs
    timelines = [plan(statement, parameters) for statement, parameters in seen
                 if "FROM run_events" in statement and "GROUP BY run_events.run_id" in statement]
    assert timelines and all(uses("ix_run_events_run_id", found) and "kind_at" not in found
                             for found in timelines), timelines


@pytest.mark.parametrize("figure", ["failed", "retried", "duplicated", "conflicted"])
def test_the_runs_behind_a_reports_figure_are_named_by_their_events_not_asked_run_by_run(app, clock, figure):
    """Asked run by run (a correlated EXISTS), SQLite read every matching event of the period through the (kind, at)
    index for each run: the Runs list behind "Execution success" took minutes at 300,000 runs (session 45)."""
    seed_history(400, 100, clock)
    week = {"series_from": clock() - timedelta(days=7), "series_to": clock()}
    with captured() as seen:
        runs_query.page(runs_query.RunFilters(**{figure: True}, **week), scope=None)
    [listed] = [plan(statement, parameters) for statement, parameters in seen if "FROM runs" in statement]
    if db.engine.dialect.name == "sqlite":
        asked = [part for part in listed.split("CORRELATED")[1:]]
        assert not any("kind_at" in part.split("|", 2)[1] for part in asked), listed
    assert not scans_runs(listed), listed
