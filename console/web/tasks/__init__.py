"""Tasks area: the list, one task's page, the actions on it, and its forms."""

from console.web.tasks import actions, editing, views  # noqa: F401 - importing them registers their routes
from console.web.tasks.blueprint import bp  # noqa: F401 - what console.web.register looks for
