"""Only console/services/engine/transitions.py writes a run's status (or asks it to stop)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WRITER = ROOT / "console" / "services" / "engine" / "transitions.py"
GUARDED = {"status", "status_reason", "cancel_requested"}
RUN_TABLES = {"Run", "RUNS", "Run.__table__"}


def _updates_runs(call: ast.Call) -> bool:
    """Tell whether a `.values(...)` call hangs off `update(Run)` / `update(RUNS)` somewhere down its chain."""
    node = call.func.value
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "update" and node.args:
                return ast.unparse(node.args[0]) in RUN_TABLES
            node = node.func
        else:
            node = node.value
    return False


def status_writes(source: str) -> list[str]:
    """Return each place in the source that writes a guarded run column outside the transitions module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "values"
                and _updates_runs(node)):
            written = {keyword.arg for keyword in node.keywords} | {
                key.value if isinstance(key, ast.Constant) else None
                for arg in node.args for key in (arg.keys if isinstance(arg, ast.Dict) else [None])}
            if written & GUARDED or None in written:  # None: a mapping whose keys cannot be seen here
                found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign | ast.AnnAssign) else []
        for target in targets:
            if (isinstance(target, ast.Attribute) and target.attr in GUARDED and isinstance(target.value, ast.Name)
                    and "run" in target.value.id.lower()):
                found.append(f"line {node.lineno}: {ast.unparse(target)} = ...")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "update runs" in node.value.lower():
            found.append(f"line {node.lineno}: raw SQL {node.value[:60]!r}")
    return found


def test_no_module_but_transitions_writes_a_runs_status():
    offenders = {}
    for path in sorted((ROOT / "console").rglob("*.py")) + sorted((ROOT / "jobs").rglob("*.py")):
        if path != WRITER and (writes := status_writes(path.read_text())):
            offenders[str(path.relative_to(ROOT))] = writes
    assert offenders == {}, "change run statuses through transitions.move / move_many / request_cancel"


@pytest.mark.parametrize("source", [
    "db.session.execute(update(Run).where(Run.id == 1).values(status='cancelled'))",
    "connection.execute(update(RUNS).where(RUNS.c.id.in_(ids)).values(**RESTART, status='pending'))",
    "db.session.execute(update(Run).where(Run.id == run.id).values(cancel_requested=True))",
    "db.session.execute(update(Run).values({'status': 'dead'}))",
    "db.session.execute(update(Run).values(changes))",
    "run.status = 'succeeded'",
    "db.session.execute(text('UPDATE runs SET status = :s'))",
])
def test_the_check_finds_each_way_of_writing_a_status(source):
    assert status_writes(source)


@pytest.mark.parametrize("source", [
    "db.session.execute(update(Run).where(Run.id == 1).values(progress=50))",
    "db.session.execute(update(WorkOrder).values(status='closed'))",
    "letter.status = 'replayed'",
])
def test_the_check_leaves_other_writes_alone(source):
    assert status_writes(source) == []
