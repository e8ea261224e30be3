"""Contract fixtures: the engine's real workers and run helpers."""

import pytest

from tests.engine.conftest import Runs, workers  # noqa: F401 - shared fixtures


@pytest.fixture
def runs(app):
    return Runs()
