"""A developer's own handler and runbook modules: added to Rebound's, read when the app is built, and a module that
cannot be used stops the start with one line naming it and the setting, not a traceback or a 500 later."""

import sys

import pytest

from console import create_app
from console.config import from_env
from console.services.engine import registry
from console.services.recovery import runbook_registry
from tests.helpers import make_config

BROKEN = {
    "syntax_slip": ("def charge(:\n    pass\n", "names 'syntax_slip', which has a syntax error: invalid syntax ("),
    "missing_dependency": ("import stripe_sdk_not_installed\n",
                           "names 'missing_dependency', but it imports 'stripe_sdk_not_installed', which is not "
                           "importable"),
    "twice_named": ("from console.services.engine.registry import handler\n\n\n@handler('demo.noop')\n"
                    "def noop(ctx):\n    return None\n",
                    "two handlers are named 'demo.noop': jobs.handlers.demo.noop and twice_named.noop; rename one"),
    # Registered as "python:prefixed", it was submitted as python:python:prefixed only (helper 120).
    "prefixed": ("from console.services.engine.registry import handler\n\n\n@handler('python:team.prefixed')\n"
                 "def prefixed(ctx):\n    return None\n",
                 "handler name 'python:team.prefixed' takes no kind prefix: @handler('team.prefixed'), submitted as "
                 "python:team.prefixed"),
}


@pytest.fixture
def own_modules(tmp_path, monkeypatch):
    """A directory on the path for the test's modules; whatever it imported is forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [*BROKEN, "billing", "no_runbooks", "lone_runbook"]:
        sys.modules.pop(name, None)
    registry._handlers.pop("billing.charge", None)  # other tests list the handlers there are
    registry.init_app(type("App", (), {"config": {"HANDLER_MODULES": ["jobs.handlers"], "DEMO": True}}))


def test_naming_ones_own_modules_keeps_rebounds():
    config = from_env({"REBOUND_HANDLER_MODULES": "billing, jobs.handlers ,shipping",
                       "REBOUND_RUNBOOK_MODULES": "my_runbooks"})
    assert config["HANDLER_MODULES"] == ["jobs.handlers", "billing", "shipping"]
    assert config["RUNBOOK_MODULES"] == ["jobs.runbooks", "my_runbooks"]


def test_an_own_handler_module_is_imported_when_the_app_is_built(own_modules, tmp_path, redis_url):
    (own_modules / "billing.py").write_text("from console.services.engine.registry import handler\n\n\n"
                                           "@handler('billing.charge')\ndef charge(ctx):\n    return {'ok': 1}\n")
    create_app(make_config(tmp_path / "data", redis_url, HANDLER_MODULES=["jobs.handlers", "billing"]))
    assert "billing" in sys.modules and {"billing.charge", "demo.noop"} <= set(registry.names())


@pytest.mark.parametrize("module", list(BROKEN))
def test_a_handler_module_that_cannot_be_used_stops_the_start_saying_why(own_modules, tmp_path, redis_url, module):
    source, said = BROKEN[module]
    (own_modules / f"{module}.py").write_text(source)
    with pytest.raises(SystemExit) as stopped:
        create_app(make_config(tmp_path / "data", redis_url, HANDLER_MODULES=["jobs.handlers", module]))
    assert str(stopped.value).startswith("REBOUND_HANDLER_MODULES ") and said in str(stopped.value)
    assert str(stopped.value).endswith("take it out of REBOUND_HANDLER_MODULES.")


def test_a_runbook_module_without_runbooks_stops_the_start_saying_so(own_modules, tmp_path, redis_url):
    (own_modules / "no_runbooks.py").write_text("TAGS = ()\n")
    with pytest.raises(SystemExit, match="REBOUND_RUNBOOK_MODULES names 'no_runbooks', which has no RUNBOOKS"):
        create_app(make_config(tmp_path / "data", redis_url, RUNBOOK_MODULES=["jobs.runbooks", "no_runbooks"]))
    runbook_registry.init_app(type("App", (), {"config": {"RUNBOOK_MODULES": ["jobs.runbooks"]}}))


@pytest.mark.parametrize(("declared", "held"), [
    ("Runbook('solo', 'Solo', 'One', 'low', (), lambda ctx: None)", "Runbook Runbook(name='solo'"),  # comma forgotten
    ("None", "NoneType None"),
    ("'replay'", "str 'replay'"),
    ("(len,)", "builtin_function_or_method <built-in function len>"),
])
def test_runbooks_declared_in_the_wrong_shape_stop_the_start_naming_the_module(own_modules, tmp_path, redis_url,
                                                                               declared, held):
    """A lone Runbook (the tuple's comma forgotten), None or a function: a traceback, 'Runbook' object is not
    iterable, naming neither the module nor the fix (helper 154)."""
    (own_modules / "lone_runbook.py").write_text(
        f"from console.services.recovery.runbook_registry import Runbook\n\nRUNBOOKS = {declared}\n")
    with pytest.raises(SystemExit) as stopped:
        create_app(make_config(tmp_path / "data", redis_url, RUNBOOK_MODULES=["jobs.runbooks", "lone_runbook"]))
    said = str(stopped.value)
    assert said.startswith("REBOUND_RUNBOOK_MODULES names 'lone_runbook', whose RUNBOOKS is a list or tuple of "
                           "Runbook(...) declarations") and f"it holds {held}" in said, said
    runbook_registry.init_app(type("App", (), {"config": {"RUNBOOK_MODULES": ["jobs.runbooks"]}}))
