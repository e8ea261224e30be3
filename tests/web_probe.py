"""A small Flask app served by `rebound web`'s own server code.

    python -m tests.web_probe PORT MARKER [--access-log] [--note-flush]

Its routes show what the server does around a request (a slow one to stop in the middle of, the address and scheme
the app was given), which the console's own routes cannot.
"""

import os
import sys
import time
from pathlib import Path

from flask import Flask, request

from console import logs, metrics
from console.processes.webserver import serve


def build(marker: Path, access_log: bool) -> Flask:
    """Return the probe app; /slow touches `marker` when it starts."""
    app = Flask(__name__)
    app.config["ACCESS_LOG"] = access_log

    @app.get("/healthz")
    def healthz():
        return {"status": "ok"}

    @app.get("/slow")
    def slow():
        marker.touch()
        time.sleep(1.5)
        return "done"

    @app.get("/addr")
    def addr():
        return {"remote_addr": request.remote_addr, "scheme": request.scheme, "secure": request.is_secure}

    return app


if __name__ == "__main__":
    logs.configure("INFO", "json")
    if "--note-flush" in sys.argv:  # which process sent its metric counts at the end: MARKER.flushed says
        metrics.flush = lambda: Path(sys.argv[2] + ".flushed").write_text(str(os.getpid()))
    serve(build(Path(sys.argv[2]), "--access-log" in sys.argv), "127.0.0.1", int(sys.argv[1]), threads=2)
