"""Console pages: one blueprint per area."""

from flask import current_app, send_from_directory
from flask_login import current_user

from console.auth import public
from console.auth.permissions import can
from console.web.nav import NAV


def register(app) -> None:
    """Register every console blueprint and the template helpers they share."""
    from console.web.admin.views import bp as admin
    from console.web.audit.views import bp as audit
    from console.web.auth.views import bp as auth
    from console.web.overview.views import bp as overview

    for blueprint in (auth, overview, admin, audit):
        app.register_blueprint(blueprint)

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
            return [item for item in NAV if can(current_user.role, item.permission)]

        return {"nav": visible_nav, "can": lambda perm: current_user.is_authenticated
                and can(current_user.role, perm)}
