import ast
import sys
from pathlib import Path

import pytest

from console.domain.statuses import (
    ACTIVE,
    NEEDS_ATTENTION,
    TERMINAL,
    TRANSITIONS,
    IllegalTransition,
    RunStatus,
    can_transition,
    check_transition,
)

# Sorted: frozenset order changes with hash seeds, and xdist workers must collect the same list.
LEGAL = sorted(((source, target) for source, targets in TRANSITIONS.items() for target in targets),
               key=lambda pair: (pair[0].value, pair[1].value))


def test_statuses_are_exactly_the_lifecycle():
    assert {s.value for s in RunStatus} == {
        "pending", "running", "retry_wait", "succeeded", "failed", "dead",
        "compensating", "compensated", "compensation_failed", "cancelled", "resolved",
    }  # fmt: skip
    assert RunStatus("retry_wait") is RunStatus.RETRY_WAIT
    assert RunStatus.DEAD == "dead" and str(RunStatus.DEAD) == "dead"


def test_every_status_has_a_row_in_the_table():
    assert set(TRANSITIONS) == set(RunStatus)


@pytest.mark.parametrize(("source", "target"), LEGAL, ids=[f"{s.value}->{t.value}" for s, t in LEGAL])
def test_every_legal_transition_passes(source, target):
    check_transition(source, target)
    check_transition(source.value, target.value)
    assert can_transition(source, target)


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("pending", "succeeded"),
        ("pending", "dead"),
        ("pending", "pending"),
        ("running", "pending"),
        ("running", "compensating"),
        ("retry_wait", "running"),
        ("retry_wait", "dead"),
        ("succeeded", "pending"),
        ("succeeded", "failed"),
        ("compensated", "pending"),
        ("compensated", "compensating"),
        ("compensating", "compensating"),
        ("compensation_failed", "pending"),
        ("dead", "running"),
        ("cancelled", "running"),
        ("resolved", "pending"),
        ("failed", "resolved"),
        ("retry_wait", "resolved"),
    ],
)
def test_illegal_transition_raises_naming_both_statuses(source, target):
    with pytest.raises(IllegalTransition) as info:
        check_transition(source, target)
    assert source in str(info.value) and target in str(info.value)
    assert not can_transition(source, target)


def test_illegal_transition_is_a_value_error():
    with pytest.raises(ValueError):
        check_transition(RunStatus.SUCCEEDED, RunStatus.RUNNING)


def test_unknown_status_raises_illegal_transition():
    with pytest.raises(IllegalTransition, match="bogus"):
        check_transition("bogus", "running")
    with pytest.raises(IllegalTransition, match="nope"):
        check_transition("pending", "nope")
    assert not can_transition("pending", "nope")


def test_d1_delayed_retry_path_is_legal():
    path = ["pending", "running", "retry_wait", "pending", "running", "succeeded"]
    for source, target in zip(path, path[1:], strict=False):
        check_transition(source, target)


def test_d2_exhausted_retries_go_dead_then_replay_returns_to_pending():
    check_transition("running", "dead")
    check_transition("dead", "pending")


def test_a_dead_run_can_be_marked_resolved_and_then_never_moves():
    check_transition("dead", "resolved")
    assert RunStatus.RESOLVED in TERMINAL and not TRANSITIONS[RunStatus.RESOLVED]


def test_compensation_path_ends_in_manual_intervention():
    for source, target in [
        ("running", "failed"),
        ("failed", "compensating"),
        ("compensating", "compensation_failed"),
        ("compensation_failed", "dead"),
    ]:
        check_transition(source, target)
    check_transition("succeeded", "compensating")


def test_manual_retry_of_failed_or_cancelled_run_is_allowed():
    check_transition("failed", "pending")
    check_transition("cancelled", "pending")


def test_terminal_and_active_sets():
    assert {s.value for s in TERMINAL} == {"succeeded", "dead", "compensated", "cancelled", "resolved"}
    assert {s.value for s in ACTIVE} == {"pending", "running", "retry_wait", "compensating"}
    assert {s.value for s in NEEDS_ATTENTION} == {"failed", "compensation_failed"}
    assert not TERMINAL & ACTIVE
    assert not TRANSITIONS[RunStatus.COMPENSATED]


def test_domain_layer_imports_only_the_standard_library_and_itself():
    domain = Path(__file__).resolve().parents[2] / "console" / "domain"
    for name in ("statuses", "policy", "errors", "breaker", "runbooks"):
        tree = ast.parse((domain / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                assert top in sys.stdlib_module_names or module.startswith("console.domain"), (name, module)
