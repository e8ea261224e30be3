"""Units of work whose writes are each one statement, sent on PostgreSQL without BEGIN and COMMIT round trips."""

from contextlib import contextmanager

from console.extensions import PINNED, db

AUTOCOMMIT = "AUTOCOMMIT"


def _autocommit(connection) -> bool:
    return connection.get_execution_options().get("isolation_level") == AUTOCOMMIT


def begin() -> bool:
    """On PostgreSQL with no transaction open, run the session's next unit of work in autocommit; tell if so.

    Each statement then commits on its own, so the unit must write nothing that needs a second statement to be
    whole (one guarded UPDATE; a transition, whose UPDATE and timeline INSERT are one statement there). It lasts
    until end(); SQLite keeps its transactions, which cost it no round trip.
    """
    # psycopg sends BEGIN and COMMIT as round trips of their own: on the engine's hot path they were four of an
    # attempt's eight statements.
    session = db.session()
    if session.in_transaction() or session.get_bind().dialect.name != "postgresql":
        return False
    session.connection(execution_options={"isolation_level": AUTOCOMMIT})
    return True


def active() -> bool:
    """Tell whether the session is in a single-statement unit."""
    session = db.session()
    return session.in_transaction() and _autocommit(session.connection())


def end() -> None:
    """End the unit, if one is open: what follows runs in ordinary transactions again."""
    session = db.session()
    if active():
        session.commit()  # nothing to send: each statement committed as it ran
    # A worker's job runs on one pinned connection: it keeps an isolation level until it is set back.
    pinned = session.info.get(PINNED)
    if pinned is not None and _autocommit(pinned):
        pinned.execution_options(isolation_level=pinned.default_isolation_level)


@contextmanager
def unit():
    """Run the block as a single-statement unit where the database allows it (see begin)."""
    begin()
    try:
        yield
    except BaseException:
        try:
            if active():
                db.session.rollback()  # sends nothing either; it only ends the session's unit
            end()
        except Exception:  # noqa: BLE001 - a session whose COMMIT failed refuses even this: the block's error is news
            db.session.rollback()
        raise
    end()
