"""The runbooks are read when the app is built: a broken runbook module stops the start, saying why."""

import sys

import pytest

from console import create_app
from tests.helpers import make_config


def test_a_broken_runbook_module_stops_the_start_with_its_error(tmp_path, redis_url, monkeypatch):
    (tmp_path / "broken_runbooks.py").write_text("RUNBOOKS = [undefined_name]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit, match="REBOUND_RUNBOOK_MODULES names 'broken_runbooks', whose import failed at "
                                         "broken_runbooks.py, line 1: "
                                         "NameError: name 'undefined_name' is not defined"):
        create_app(make_config(tmp_path / "data", redis_url, RUNBOOK_MODULES=["jobs.runbooks", "broken_runbooks"]))
    sys.modules.pop("broken_runbooks", None)
