"""Engine settings, read from the app's config (which reads them from REBOUND_* variables)."""

from flask import current_app


def setting(name: str):
    """Return one engine setting of the current app."""
    return current_app.config[name]
