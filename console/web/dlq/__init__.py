"""DLQ area: dead letters grouped by error, replayed and discarded, one by one or in bulk."""

from console.web.dlq import bulk, letters, views  # noqa: F401 - importing them registers their routes
from console.web.dlq.blueprint import bp  # noqa: F401 - what console.web.register looks for
