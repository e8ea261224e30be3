"""A scheduler job that fails: a database that does not answer is one warning line, anything else a traceback."""

import logging

from sqlalchemy.exc import OperationalError

from console.scheduler.process import _in_app


def test_a_job_the_database_did_not_answer_is_one_line_and_a_bug_keeps_its_traceback(app, caplog):
    def restarting():
        raise OperationalError("SELECT 1", {}, Exception("the database system is shutting down\nDETAIL: x"))

    def broken():
        raise KeyError("rule")

    with caplog.at_level(logging.WARNING, logger="rebound.scheduler"):
        _in_app(app, restarting, "reconcile")()
        _in_app(app, broken, "alert-rules")()
    quiet, loud = caplog.records
    assert (quiet.levelname, quiet.exc_info) == ("WARNING", None)
    assert quiet.getMessage() == ("scheduler job reconcile skipped: the database did not answer "
                                  "(the database system is shutting down)")
    assert loud.levelname == "ERROR" and loud.exc_info[0] is KeyError
