"""Integration fixtures: the engine's real worker processes."""

from tests.engine.conftest import workers  # noqa: F401 - shared fixture
