"""`rebound up`, `web`, `worker` and `scheduler`: start the console's long-running processes."""

import atexit
import gc
import logging
import os
import sys
import threading

import click
from flask import current_app
from flask.cli import with_appcontext

from console.logs import mask_prints, rq_level


def _start_process() -> None:
    """Prepare a long-running process: Redis reachable (embedded unless REBOUND_REDIS_URL), defaults loaded."""
    from console import metrics
    from console.processes import embedded_redis, stacks
    from console.services.system import bootstrap

    stacks.dump_on_signal()  # the supervisor asks a child that will not stop where it hangs
    if not current_app.config.get("REDIS_URL_GIVEN"):
        _, process = embedded_redis.start(current_app.config["DATA_DIR"])
        if process is not None:
            atexit.register(process.terminate)
    bootstrap.ensure_ready()
    metrics.start_batching(current_app.config["METRICS_FLUSH_S"])


def _warn_of_exposed_files() -> None:
    """Say at start when other accounts may read the data dir or the SQLite file (they are never changed here)."""
    from console import private
    from console.db.sqlite import database_file
    from console.extensions import db

    paths = [current_app.config["DATA_DIR"]]
    if db.engine.dialect.name == "sqlite":
        paths.append(database_file(db.engine.url))
    for problem in private.exposed(*(path for path in paths if path)):
        logging.getLogger("rebound.security").warning(problem)


def _freeze_startup_heap() -> None:
    """Leave what start-up made (the app, SQLAlchemy, RQ, handlers) out of every later garbage collection."""
    # A full collection walks every tracked object: ~65 ms of standing still in a worker, which showed up as a
    # burst of late runs. Start-up's objects live as long as the process; freezing them before granian forks its
    # workers also keeps their pages shared.
    gc.collect()
    gc.freeze()


def _child(*args: str) -> list[str]:
    return [sys.executable, "-m", "console.cli", *args]


@click.command("up")
@click.option("--workers", type=click.IntRange(1, 1000), default=None,
              help="Worker processes (default REBOUND_WORKERS).")
@with_appcontext
def up_command(workers):
    """Start everything: embedded Redis, web, workers and scheduler, supervised."""
    from console.extensions import db
    from console.processes import console_lock, embedded_redis
    from console.processes.ready import ReadyNotice
    from console.processes.supervisor import Child, Supervisor
    from console.services.errors import InvalidInput
    from console.services.system import bootstrap, demo

    config = current_app.config
    try:
        console_lock.hold(config["DATA_DIR"])
    except console_lock.AlreadyRunning as holder:
        raise click.ClickException(
            f"a console already runs on the data dir {config['DATA_DIR']} (rebound up, pid {holder}): stop it first "
            "(Ctrl-C where it runs), or give this one its own REBOUND_DATA_DIR") from None
    _refuse_a_taken_port(os.environ.get("REBOUND_HOST", "127.0.0.1"), config["PORT"])
    env = dict(os.environ)
    keeper = None
    if not config.get("REDIS_URL_GIVEN"):
        keeper = embedded_redis.Keeper(config["DATA_DIR"])
        env["REBOUND_REDIS_URL"] = keeper.url
    env.setdefault("REBOUND_DATA_DIR", config["DATA_DIR"])
    try:
        try:
            password = bootstrap.prepare(config["ADMIN_PASSWORD"])
        except InvalidInput as refused:  # the first admin's, from REBOUND_ADMIN_PASSWORD: one line, not a traceback
            raise click.ClickException(f"REBOUND_ADMIN_PASSWORD cannot be the first admin's password: {refused.detail}."
                                       " Choose another, or leave it unset for a generated one") from None
        if password:
            click.secho(f"\n  First admin created. Log in as 'admin' with password: {password}\n"
                        "  (shown once; set REBOUND_ADMIN_PASSWORD to choose it)\n", fg="yellow", bold=True)
        if config["DEMO"] and demo.is_empty():
            click.echo(demo.seed(roles=True))
        # The supervisor is done with the database: a connection kept open for its lifetime checkpointed its WAL at
        # exit, into a rebound.db restored from a backup meanwhile, and corrupted it (a restore loses run rows).
        db.session.remove()
        db.engine.dispose()
        count = workers or config["WORKERS"]
        children = [Child("web", _child("web"), env=env), Child("scheduler", _child("scheduler"), env=env)]
        children += [Child(f"worker-{n + 1}", _child("worker"), env=env) for n in range(count)]
        url = f"http://127.0.0.1:{config['PORT']}"
        click.echo(f"Rebound is starting; it says \"ready\" once {url} answers.")
        # The password goes to this terminal only (click, not logging): no log handler ever sees it.
        ready = ReadyNotice(url, lambda text: click.secho(text, fg="green", bold=True), password)

        def tend() -> None:
            if keeper is not None:
                keeper.tend()
            ready()

        Supervisor(children, tend=tend).run()
    finally:
        if keeper is not None:
            keeper.close()  # last: the children's final writes go to Redis; also when preparing failed


def _refuse_a_taken_port(host: str, port: int) -> None:
    from console.processes.webserver import PortTaken, check_port_free

    try:
        check_port_free(host, port)
    except PortTaken as taken:
        raise click.ClickException(str(taken)) from None


@click.command("web")
@click.option("--host", default=lambda: os.environ.get("REBOUND_HOST", "127.0.0.1"), show_default="127.0.0.1")
# Ranges: --port 99999 was a traceback (OverflowError), --processes 0 or -3 quietly ran one worker (helper 109).
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Default REBOUND_PORT (8000).")
@click.option("--workers", type=click.IntRange(1, 1000), default=None,
              help="Server processes (default REBOUND_WEB_WORKERS, 1).")
@click.option("--threads", type=click.IntRange(1, 1000), default=None,
              help="Threads per process (default REBOUND_WEB_THREADS, 4).")
@with_appcontext
def web_command(host, port, workers, threads):
    """Serve the console and API with granian."""
    from console.processes.webserver import serve

    config = current_app.config
    _refuse_a_taken_port(host, port or config["PORT"])
    _start_process()
    _warn_of_exposed_files()
    _freeze_startup_heap()
    serve(current_app._get_current_object(), host, port or config["PORT"], workers=workers or config["WEB_WORKERS"],
          threads=threads or config["WEB_THREADS"])


@click.command("worker")
@click.option("--processes", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Worker processes to supervise.")
@click.option("--kind", type=click.Choice(["simple", "fork"]), default="simple", show_default=True,
              help="simple: handlers run in the worker (fastest); fork: each handler call in a child (isolated).")
@click.option("--burst", is_flag=True, help="Stop when the queues are empty.")
@with_appcontext
def worker_command(processes, kind, burst):
    """Run RQ workers (with RQ's scheduler on, for delayed retries)."""
    from rq.worker import DequeueStrategy

    from console.parent_death import forked_children_die_with_this_process
    from console.processes.supervisor import Child, Supervisor
    from console.processes.worker import build_worker
    from console.redis_conn import get_redis

    _start_process()
    if processes > 1:
        args = ["worker", "--kind", kind] + (["--burst"] if burst else [])
        Supervisor([Child(f"worker-{n + 1}", _child(*args), one_shot=burst) for n in range(processes)]).run()
        return
    forked_children_die_with_this_process()  # RQ's scheduler child and fork-kind handler children
    mask_prints()  # a handler's print() reaches the same console the log lines do
    worker = build_worker(current_app._get_current_object(), get_redis(), kind)
    _freeze_startup_heap()
    # RQ sets its own loggers to the level it is given, INFO unless told: WARNING unless REBOUND_LOG_LEVEL=DEBUG.
    # The queues take turns (RQ's round robin): read in a fixed order, a backlog of new runs kept every due retry
    # waiting (p50 5 min behind 7,000 queued runs; helper 170), and bulk replays and runbooks behind them too.
    worker.work(with_scheduler=True, burst=burst, logging_level=rq_level(),
                dequeue_strategy=DequeueStrategy.ROUND_ROBIN)


@click.command("scheduler")
@with_appcontext
def scheduler_command():
    """Run the scheduler; with several running, one leads and the others stand by."""
    import signal

    from console.scheduler import process

    _start_process()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    _freeze_startup_heap()
    process.run(current_app._get_current_object(), stop)
