"""What an attempt sends the database: on PostgreSQL, three statements outside any transaction for a no-op run."""

import contextlib
import threading

import pytest
from sqlalchemy import event

from console.extensions import PINNED, db
from console.services.engine.execute import execute

NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 60}


class Seen(list):
    """The statements' (word, autocommit) pairs, with their texts beside for a failure to show."""

    def __init__(self):
        super().__init__()
        self.texts: list[str] = []


@contextlib.contextmanager
def statements():
    """Collect (first word, sent in autocommit) for each statement the engine sends; `seen.texts` holds their starts."""
    seen = Seen()

    mine = threading.current_thread()

    def note(conn, cursor, statement, parameters, context, executemany):
        # The heartbeat thread an earlier attempt of this process started beats on its own clock; its UPDATE, when
        # it lands during this attempt, is not the attempt's (a full PostgreSQL pass once counted one).
        if threading.current_thread() is not mine:
            return
        # sqlite3 on Python 3.11 has no autocommit attribute: its transactions are what it always had.
        seen.append((statement.split()[0].upper(), getattr(conn.connection.dbapi_connection, "autocommit", False)))
        seen.texts.append(statement[:200])

    event.listen(db.engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", note)


@contextlib.contextmanager
def pinned_connection():
    """Run on one connection pinned to the session, as a worker runs each job (console/processes/worker.py)."""
    with db.engine.connect() as connection:
        db.session.remove()
        db.session().info[PINNED] = connection
        try:
            yield connection
        finally:
            db.session.remove()


@pytest.mark.parametrize("pinned", [False, True], ids=["own connection", "pinned as in a worker"])
def test_a_no_op_attempt_is_one_read_and_two_one_statement_writes(runs, clock, pinned):
    warm, run_id = runs.submit(idempotency_key="warm"), runs.submit(idempotency_key="measured")
    db.session.commit()
    assert execute(warm, 0, clock=clock) == "succeeded"  # names a process remembers (the tenant's) are read once
    db.session.commit()
    with pinned_connection() if pinned else contextlib.nullcontext() as connection, statements() as seen:
        assert execute(run_id, 0, clock=clock) == "succeeded"
        if pinned:  # the job's connection is back to transactions for whatever follows the attempt
            assert not getattr(connection.connection.dbapi_connection, "autocommit", False)
    if db.engine.dialect.name == "postgresql":
        # The run with what admits it read at once, then the claim and the success, each an UPDATE with its
        # timeline INSERT as one statement; none needs a BEGIN or COMMIT round trip.
        assert seen == [("SELECT", True), ("WITH", True), ("WITH", True)]
    else:
        assert [word for word, _ in seen] == ["SELECT", "UPDATE", "INSERT", "UPDATE", "INSERT"]
    assert [e.kind for e in runs.events(run_id)] == ["submitted", "running", "succeeded"]
    assert runs.get(run_id).attempt == 1


@pytest.mark.parametrize("pinned", [False, True], ids=["own connection", "pinned as in a worker"])
def test_off_a_retry_timer_the_two_moves_share_one_transaction(runs, clock, pinned):
    run_id = runs.submit("demo.flaky", {"fail_times": 1}, policy=NO_JITTER)
    db.session.commit()
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    clock.set(runs.get(run_id).next_retry_at)
    db.session.commit()
    with pinned_connection() if pinned else contextlib.nullcontext(), statements() as seen:
        assert execute(run_id, 1, clock=clock) == "succeeded"
    writes = [autocommit for word, autocommit in seen if word in ("WITH", "UPDATE", "INSERT")]
    if db.engine.dialect.name == "postgresql":
        # retry_wait → pending (the timer) and pending → running commit together; the success is one statement.
        assert writes == [False, False, True], seen.texts
    assert [e.kind for e in runs.events(run_id)][-3:] == ["pending", "running", "succeeded"]
