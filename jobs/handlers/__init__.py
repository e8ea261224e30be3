"""Python handlers; importing this package registers them all."""

from jobs.handlers import demo  # noqa: F401
