"""Admin area: people, tokens, tenants, channels, alert rules, settings, runbooks; one blueprint, many modules."""

from console.web.admin import (  # noqa: F401 - importing them registers their routes
    alert_rules,
    channels,
    runbooks,
    settings,
    tenants,
    views,
)
from console.web.admin.blueprint import bp  # noqa: F401 - what console.web.register looks for
