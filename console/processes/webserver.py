"""Serve the app with gunicorn (threads, so one slow page does not block the rest)."""

import logging
from pathlib import Path

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


# A Unix socket's path must fit in sun_path (108 bytes on Linux, with its terminating NUL).
MAX_SOCKET_PATH = 107
log = logging.getLogger("rebound.web")


def control_socket(data_dir: str) -> dict:
    """Put gunicorn's control socket (`gunicornc`) in the data dir, not $HOME; off if the path is too long."""
    # Two consoles on one machine (or one per test) each have their own data dir, so their sockets never collide.
    path = str(Path(data_dir) / "gunicorn.ctl")
    if len(path.encode()) > MAX_SOCKET_PATH:
        log.warning("gunicorn's control socket is off: its path in the data dir is too long for a socket (%s)", path)
        return {"control_socket_disable": True}
    return {"control_socket": path}


def options(app, host: str, port: int, workers: int = 1, threads: int = 8) -> dict:
    """Return gunicorn's settings for this app."""
    return {
        "bind": f"{host}:{port}",
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        # None is gunicorn's "no access log": a line for every 5-second live poll buried what a person needs, and
        # each line cost its masking and JSON formatting on the submit path (docs/architecture.md).
        "accesslog": "-" if app.config.get("ACCESS_LOG") else None,
        "logger_class": RootLogger,
        "graceful_timeout": 10,
        "timeout": 60,
        # Forwarded headers are believed in one place, ProxyFix (REBOUND_TRUSTED_PROXIES); gunicorn's own default
        # would take X-Forwarded-Proto from any local process and call a plain-HTTP request secure.
        "forwarded_allow_ips": "",
        "secure_scheme_headers": {},
        **control_socket(app.config["DATA_DIR"]),
    }


def serve(app, host: str, port: int, workers: int = 1, threads: int = 8) -> None:
    """Serve until stopped."""
    GunicornServer(app, options(app, host, port, workers, threads)).run()
