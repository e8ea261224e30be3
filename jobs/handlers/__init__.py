"""Python handlers; importing this package registers them all."""

from jobs.handlers import demo, demo_harmful  # noqa: F401
