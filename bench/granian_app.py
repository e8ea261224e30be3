"""The app as granian builds it in each of its worker processes, for `bench.submit_cpu --setups granian:1x8`."""

import gc

from console import create_app, logs, metrics
from console.services.system import bootstrap


def create():
    """Build the app as `rebound web` does before serving: defaults loaded, metrics batched, start-up frozen."""
    app = create_app()
    logs.configure()
    with app.app_context():
        bootstrap.ensure_ready()
    metrics.start_batching(app.config["METRICS_FLUSH_S"])
    gc.collect()
    gc.freeze()
    return app
