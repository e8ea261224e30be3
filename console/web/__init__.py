"""Console pages: one blueprint per area."""

import importlib

from flask import current_app, has_request_context, request, send_from_directory
from flask_login import current_user

from console.auth import public
from console.domain.clock import utcnow
from console.domain.figures import duration
from console.services.people.permissions import can
from console.web.display import display_prefs
from console.web.nav import NAV

# One line per area; each module defines `bp`.
BLUEPRINTS = [
    "console.web.auth.views",
    "console.web.overview.views",
    "console.web.admin",
    "console.web.audit.views",
    "console.web.workorders.views",
    "console.web.dlq.views",
    "console.web.approvals.views",
    "console.web.runbooks.views",
    "console.web.runs",
    "console.web.tasks.views",
    "console.web.policies.views",
    "console.web.breakers.views",
    "console.web.queues.views",
    "console.web.reports.views",
]


def register(app) -> None:
    """Register every console blueprint and the template helpers they share."""
    for module in BLUEPRINTS:
        app.register_blueprint(importlib.import_module(module).bp)

    # "4 min 2 s": how late an SLA breach was, on the run, task and report pages.
    app.add_template_filter(duration, "duration")

    @app.get("/vendor/plotly.min.js", endpoint="plotly_js")
    @public
    def plotly_js():
        import plotly

        directory = current_app.config.get("PLOTLY_DIR") or f"{plotly.__path__[0]}/package_data"
        return send_from_directory(directory, "plotly.min.js", max_age=86400)

    @app.context_processor
    def console_context():
        def visible_nav():
            if not current_user.is_authenticated:
                return []
            # An area appears once its blueprint is registered; until then there is no link to it.
            return [item for item in NAV if item.endpoint in current_app.view_functions
                    and can(current_user.role, item.permission)]

        cookies = request.cookies if has_request_context() else {}
        return {"nav": visible_nav, "now": utcnow(), "display": display_prefs(cookies),
                "can": lambda perm: current_user.is_authenticated and can(current_user.role, perm)}
