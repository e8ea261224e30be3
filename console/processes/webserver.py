"""Serve the app with gunicorn (threads, so one slow page does not block the rest)."""

import logging

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger


class RootLogger(Logger):
    """Gunicorn's error and access lines go through the process's handler: same format, secrets masked."""

    def setup(self, cfg):
        super().setup(cfg)
        if logging.getLogger().handlers:
            for log in (self.error_log, self.access_log):
                log.handlers.clear()
                log.propagate = True


class GunicornServer(BaseApplication):
    """Gunicorn, configured in code and serving an app that is already built."""

    def __init__(self, app, options: dict):
        self.application = app
        self.options = options
        super().__init__()

    def load_config(self):
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        return self.application


def serve(app, host: str, port: int, workers: int = 1, threads: int = 8) -> None:
    """Serve until stopped."""
    GunicornServer(app, {
        "bind": f"{host}:{port}",
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        "accesslog": "-",
        "logger_class": RootLogger,
        "graceful_timeout": 10,
        "timeout": 60,
        # Forwarded headers are believed in one place, ProxyFix (REBOUND_TRUSTED_PROXIES); gunicorn's own default
        # would take X-Forwarded-Proto from any local process and call a plain-HTTP request secure.
        "forwarded_allow_ips": "",
        "secure_scheme_headers": {},
    }).run()
