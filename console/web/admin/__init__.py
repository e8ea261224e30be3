"""Admin area: people, tokens, channels, alert rules, settings, runbooks; each module adds routes to one blueprint."""

from console.web.admin import (  # noqa: F401 - importing them registers their routes
    alert_rules,
    channels,
    runbooks,
    settings,
    views,
)
from console.web.admin.blueprint import bp  # noqa: F401 - what console.web.register looks for
