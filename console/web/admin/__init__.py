"""Admin area: people and tokens, channels, alert rules, runbooks; each module adds its routes to one blueprint."""

from console.web.admin import alert_rules, channels, runbooks, views  # noqa: F401 - importing them registers routes
from console.web.admin.blueprint import bp  # noqa: F401 - what console.web.register looks for
