"""Report fixtures: the hand-built history, rolled up."""

import pytest

from console.services.reports import rollup
from tests.reports import history


@pytest.fixture
def built(app, clock, monkeypatch):
    """The history of tests/reports/history.py, with the rollups computed; returns its ids."""
    ids = history.build(clock, monkeypatch)
    rollup.tick(clock)
    return ids
