"""The README's "Writing a runbook" example works as written, and a wrong declaration says what to fix."""

import re
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from console import create_app
from console.domain.runbooks import Param, ParamType
from console.extensions import db
from console.services.recovery import runbook_registry
from console.services.recovery.runbook_registry import Runbook
from tests.factories import changes_of, run_now
from tests.helpers import make_config

README = Path(__file__).parents[2] / "README.md"


def _example() -> str:
    section = README.read_text().split("### Writing a runbook", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.fixture
def billing(app, tmp_path, monkeypatch):
    """The README's module on the path and registered, and the invoices table it works on."""
    (tmp_path / "billing_runbooks.py").write_text(_example())
    monkeypatch.syspath_prepend(str(tmp_path))
    db.session.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY, status VARCHAR(20) NOT NULL)"))
    db.session.execute(text("INSERT INTO invoices (id, status) VALUES (1, 'sending'), (2, 'paid'), (3, 'sending')"))
    db.session.commit()
    app.config["RUNBOOK_MODULES"] = ["jobs.runbooks", "billing_runbooks"]
    runbook_registry.init_app(app)
    yield
    app.config["RUNBOOK_MODULES"] = ["jobs.runbooks"]
    runbook_registry.init_app(app)
    sys.modules.pop("billing_runbooks", None)
    db.session.rollback()
    db.session.execute(text("DROP TABLE invoices"))
    db.session.commit()


def _statuses() -> dict:
    db.session.rollback()
    return dict(db.session.execute(text("SELECT id, status FROM invoices ORDER BY id")).all())


def test_the_readmes_runbook_dry_runs_then_runs(billing, staff, clock):
    dry = run_now("reopen_invoices", {"limit": "10"}, staff["ada"], clock=clock, dry_run=True)
    assert dry.status == "succeeded" and "09:00:00 2 invoice(s) to reopen\n" in dry.log
    assert changes_of(dry, planned=True) == [("invoice", "1", "status", "sending", "open"),
                                             ("invoice", "3", "status", "sending", "open")]
    assert _statuses() == {1: "sending", 2: "paid", 3: "sending"}
    real = run_now("reopen_invoices", {"limit": 1}, staff["ada"], clock=clock)
    assert real.status == "succeeded" and "09:00:00 1 invoice(s) reopened\n" in real.log
    assert changes_of(real, planned=False) == [("invoice", "1", "status", "sending", "open")]
    assert _statuses() == {1: "open", 2: "paid", 3: "sending"}


@pytest.mark.parametrize(("declare", "said"), [
    (lambda: Runbook("fix_it", "Fix", "", "extreme", (), print),
     "runbook fix_it: risk is one of low, medium, high, not 'extreme'"),
    (lambda: Param("limit", "integer"),
     "parameter limit: type is one of str, int, float, bool, choice, datetime, run, dead_letter, task, not 'integer'"),
    (lambda: Runbook("fix_it", "Fix", "", "low", (), "fix_it"),
     "runbook fix_it: its code (after the params) is a function taking ctx"),
    (lambda: Runbook("fix_it", "Fix", "", "low", ("limit",), print),
     "runbook fix_it: params are Param(...) declarations"),
    # An extension developer's walk: these said "one of up, down.", "at most 5." or nothing at all.
    (lambda: Param("mode", "choice", choices=("up", "down"), default="sideways"),
     "parameter mode: its default 'sideways' is not one of up, down"),
    (lambda: Param("limit", "int", maximum=5, default=9), "parameter limit: its default 9 is not at most 5"),
    (lambda: Param("note", "str", minimum=1), "parameter note: only int and float take minimum and maximum"),
    (lambda: Param("limit", "int", max_length=3), "parameter limit: only text takes max_length"),
    (lambda: Runbook("fix_it", "Fix", "", "low", (Param("limit", "int"), Param("limit", "str")), print),
     "runbook fix_it: two parameters are named limit"),
    (lambda: Runbook("executions", "Fix", "", "low", (), print),
     "runbook name 'executions': lower-case letters, digits and _, starting with a letter, and not executions "
     "(words the console's addresses use)"),
])
def test_a_wrong_declaration_says_what_to_fix(declare, said):
    with pytest.raises(ValueError) as refused:
        declare()
    assert str(refused.value) == said


def test_a_type_written_as_text_is_that_type():
    assert Param("limit", "int", default="5").type is ParamType.INT  # a str default was an id before: its type


def test_a_module_with_a_wrong_declaration_stops_the_start_saying_what(tmp_path, redis_url, monkeypatch):
    (tmp_path / "risky_runbooks.py").write_text(
        "from console.services.recovery.runbook_registry import Runbook\n\n"
        "RUNBOOKS = (Runbook('fix_it', 'Fix', '', 'extreme', (), print),)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit, match="REBOUND_RUNBOOK_MODULES names 'risky_runbooks', whose import failed at "
                                         "risky_runbooks.py, line 3: ValueError: runbook fix_it: risk is one of low, "
                                         "medium, high, not 'extreme'"):
        create_app(make_config(tmp_path / "data", redis_url, RUNBOOK_MODULES=["jobs.runbooks", "risky_runbooks"]))
    sys.modules.pop("risky_runbooks", None)
    runbook_registry.init_app(type("App", (), {"config": {"RUNBOOK_MODULES": ["jobs.runbooks"]}}))
