"""Serve the app with granian: HTTP parsed in Rust, each request on one of a pool of Python threads."""

import logging
import multiprocessing
import multiprocessing.util
import socket

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.server import Server

from console import metrics
from console.parent_death import forked_children_die_with_this_process

# In-flight requests get this long to finish once the server is asked to stop; then its workers are killed.
GRACE_S = 10
# hyper's read buffer for the request line and headers (its least is 8 KiB): a head past about twice this (its buffer
# grows by whole reads; 100,000 bytes passed, 131,000 did not) is answered 431 and the connection closed. Gunicorn
# allowed a 4 KiB request line and 100 headers of 8 KiB. Bodies are bounded by the app (REBOUND_MAX_BODY_BYTES).
MAX_HEAD_BYTES = 64 * 1024
# A client that opened a connection has this long to send a request's headers (slowloris).
HEADER_READ_TIMEOUT_MS = 30_000
# Granian's loggers go to the root, whose handler writes the process's JSON lines with secrets masked.
LOG_CONFIG = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {},
    "handlers": {},
    "loggers": {"_granian": {"handlers": [], "propagate": True},
                "granian.access": {"handlers": [], "level": "INFO", "propagate": True}},
}
# As gunicorn's line said: the client, the request with its query (the handler masks secrets in it), the status and
# the time taken; granian does not give the response's size.
ACCESS_FORMAT = '%(addr)s "%(method)s %(path)s?%(query_string)s %(protocol)s" %(status)d %(dt_ms).1f ms'


def server(app, host: str, port: int, workers: int = 1, threads: int = 4) -> Server:
    """Return granian's server for this app, configured in code."""
    return Server(
        "rebound",  # only a name: the app itself is handed to the workers (serve below)
        address=host,
        port=port,
        interface=Interfaces.WSGI,
        workers=workers,
        blocking_threads=threads,
        http=HTTPModes.http1,
        websockets=False,
        http1_settings=HTTP1Settings(header_read_timeout=HEADER_READ_TIMEOUT_MS, max_buffer_size=MAX_HEAD_BYTES),
        log_dictconfig=LOG_CONFIG,
        log_level=logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower(),
        # Off by default: a line for every 5-second live poll buried what a person needs, and each line cost its
        # masking and JSON formatting on the submit path (docs/architecture.md).
        log_access=bool(app.config.get("ACCESS_LOG")),
        log_access_format=ACCESS_FORMAT,
        workers_kill_timeout=GRACE_S,
        respawn_failed_workers=True,
    )


class PortTaken(Exception):
    """Another process listens on the address the web would serve."""


def check_port_free(host: str, port: int) -> None:
    """Raise PortTaken if something listens on host:port: granian binds with SO_REUSEPORT, so a second web started
    beside a first (an old one left running, another deployment's) shared the port, and the kernel split requests
    between the two consoles (helper 118)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection's TIME_WAIT is no listener
        try:
            probe.bind((host, port))
        except OSError as error:
            raise PortTaken(f"{host}:{port} is taken ({error.strerror}): another process listens there (another "
                            "rebound web, or another program); stop it, or choose another port (--port, or "
                            "REBOUND_PORT)") from None


def serve(app, host: str, port: int, workers: int = 1, threads: int = 4) -> None:
    """Serve until SIGTERM or SIGINT, then let in-flight requests finish (up to GRACE_S)."""
    # The workers serve the app built here, so they must be forks (Python 3.14 defaults to forkserver, for which
    # granian would spawn fresh interpreters that cannot be handed it).
    multiprocessing.set_start_method("fork", force=True)
    # Killed -9, this process must not leave its forked workers serving on the port.
    forked_children_die_with_this_process()
    server(app, host, port, workers, threads).serve(target_loader=lambda _name: _in_worker(app))


def _in_worker(app):
    """Prepare a just-forked worker and return the app it serves."""
    # A worker ends through multiprocessing's exit, which skips atexit: send its batched counts at the end here.
    multiprocessing.util.Finalize(None, metrics.flush, exitpriority=10)
    return app
