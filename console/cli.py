"""The `rebound` command (also `flask --app app ...`): run, administer and inspect the console."""

import atexit
import gc
import logging
import os
import sys
import threading

import click
from flask import current_app
from flask.cli import FlaskGroup, with_appcontext
from sqlalchemy.exc import DBAPIError

from console.commands.approvals import approvals_group
from console.commands.channels import channels_group
from console.commands.conflict_templates import templates_group
from console.commands.imports import import_failures_command
from console.commands.inspection import retry_inspect_command, task_dryrun_command
from console.commands.quota_classes import quota_classes_group
from console.commands.reports import sla_report_command
from console.commands.reservations import reservations_group
from console.commands.runbooks import recovery_runbook_command
from console.commands.tenants import tenants_group
from console.domain.words import plural
from console.logs import configure as configure_logging
from console.logs import rq_level


def _start_process() -> None:
    """Prepare a long-running process: Redis reachable (embedded unless REBOUND_REDIS_URL), defaults loaded."""
    from console import metrics
    from console.processes import embedded_redis
    from console.services.system import bootstrap

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
@click.option("--workers", type=int, default=None, help="Worker processes (default REBOUND_WORKERS).")
@with_appcontext
def up_command(workers):
    """Start everything: embedded Redis, web, workers and scheduler, supervised."""
    from console.processes import embedded_redis
    from console.processes.ready import ReadyNotice
    from console.processes.supervisor import Child, Supervisor
    from console.services.system import bootstrap, demo

    config = current_app.config
    env = dict(os.environ)
    keeper = None
    if not config.get("REDIS_URL_GIVEN"):
        keeper = embedded_redis.Keeper(config["DATA_DIR"])
        env["REBOUND_REDIS_URL"] = keeper.url
    env.setdefault("REBOUND_DATA_DIR", config["DATA_DIR"])
    password = bootstrap.prepare(config["ADMIN_PASSWORD"])
    if password:
        click.secho(f"\n  First admin created. Log in as 'admin' with password: {password}\n"
                    "  (shown once; set REBOUND_ADMIN_PASSWORD to choose it)\n", fg="yellow", bold=True)
    if config["DEMO"] and demo.is_empty():
        click.echo(demo.seed(roles=True))
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

    try:
        Supervisor(children, tend=tend).run()
    finally:
        if keeper is not None:
            keeper.close()  # last: the children's final writes go to Redis


@click.command("web")
@click.option("--host", default=lambda: os.environ.get("REBOUND_HOST", "127.0.0.1"), show_default="127.0.0.1")
@click.option("--port", type=int, default=None, help="Default REBOUND_PORT (8000).")
@click.option("--workers", type=int, default=None, help="Server processes (default REBOUND_WEB_WORKERS, 1).")
@click.option("--threads", type=int, default=None, help="Threads per process (default REBOUND_WEB_THREADS, 4).")
@with_appcontext
def web_command(host, port, workers, threads):
    """Serve the console and API with granian."""
    from console.processes.webserver import serve

    config = current_app.config
    _start_process()
    _warn_of_exposed_files()
    _freeze_startup_heap()
    serve(current_app._get_current_object(), host, port or config["PORT"], workers=workers or config["WEB_WORKERS"],
          threads=threads or config["WEB_THREADS"])


@click.command("worker")
@click.option("--processes", type=int, default=1, show_default=True, help="Worker processes to supervise.")
@click.option("--kind", type=click.Choice(["simple", "fork"]), default="simple", show_default=True,
              help="simple: handlers run in the worker (fastest); fork: each handler call in a child (isolated).")
@click.option("--burst", is_flag=True, help="Stop when the queues are empty.")
@with_appcontext
def worker_command(processes, kind, burst):
    """Run RQ workers (with RQ's scheduler on, for delayed retries)."""
    from console.processes.parent_death import forked_children_die_with_this_process
    from console.processes.supervisor import Child, Supervisor
    from console.processes.worker import build_worker
    from console.redis_conn import get_redis

    _start_process()
    if processes > 1:
        args = ["worker", "--kind", kind] + (["--burst"] if burst else [])
        Supervisor([Child(f"worker-{n + 1}", _child(*args)) for n in range(processes)]).run()
        return
    forked_children_die_with_this_process()  # RQ's scheduler child and fork-kind handler children
    worker = build_worker(current_app._get_current_object(), get_redis(), kind)
    _freeze_startup_heap()
    # RQ sets its own loggers to the level it is given, INFO unless told: WARNING unless REBOUND_LOG_LEVEL=DEBUG.
    worker.work(with_scheduler=True, burst=burst, logging_level=rq_level())


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


@click.command("create-user")
@click.argument("username")
@click.option("--role", required=True, type=click.Choice(["viewer", "operator", "approver", "manager", "admin"]))
@click.option("--password", default=None, help="Generated and printed when omitted.")
@click.option("--tenant", default=None, help="Limit the user to one tenant.")
@with_appcontext
def create_user_command(username, role, password, tenant):
    """Create a user."""
    from console.services.actor import Actor
    from console.services.errors import ServiceError
    from console.services.people import tenants, users

    try:
        scope = tenants.require(tenant) if tenant else None
        user, generated = users.create(username, role, password, Actor("cli"), tenant=scope)
    except ServiceError as error:
        raise click.ClickException(error.detail) from None
    click.echo(f"Created {user.username} ({user.role}).")
    if generated:
        click.echo(f"Password: {generated}")


@click.command("create-token")
@click.argument("username")
@click.option("--tenant", default=None, help="Limit the token to one tenant.")
@click.option("--name", default="cli", show_default=True)
@with_appcontext
def create_token_command(username, tenant, name):
    """Print a new bearer token acting as USERNAME."""
    from console.services.actor import Actor
    from console.services.errors import ServiceError
    from console.services.people import tenants, tokens, users

    user = users.find(username)
    if user is None:
        raise click.ClickException(f"no user named {username!r}")
    try:
        scope = tenants.require(tenant) if tenant else None
        _, plaintext = tokens.issue(user, Actor("cli"), name=name, tenant=scope)
    except ServiceError as error:
        raise click.ClickException(error.detail) from None
    click.echo(plaintext)


@click.command("seed-demo")
@click.option("--force", is_flag=True, help="Seed even when the database already has tasks.")
@click.option("--runs", type=int, default=0, help="Also insert this many finished runs of history (scale tests).")
@click.option("--dead-letters", type=int, default=None, help="How many of those runs are dead (default runs/10).")
@click.option("--days", type=int, default=None,
              help="Spread the --runs over this many days as scheduled tasks' firings, with late starts, retries, "
                   "replays, alerts and SLA breaches (for the Reports page).")
@click.option("--tasks", type=int, default=200, show_default=True, help="How many tasks fire the --days history.")
@with_appcontext
def seed_demo_command(force, runs, dead_letters, days, tasks):
    """Create demo tenants, tasks, runs, a fortnight of report history and a waiting data fix; --runs N instead adds
    N runs of history for scale tests (--days D: over D days, for the Reports page)."""
    from console.services.system import bootstrap, demo
    from console.services.system.demo_history import seed_history
    from console.services.system.demo_reports import seed_report_history

    bootstrap.ensure_ready()  # the runs it creates need the default policies, even before any process ran
    if not force and not demo.is_empty():
        raise click.ClickException("the database already has tasks; use --force to add demo data anyway")
    click.echo(demo.seed(roles=not runs))  # without --runs: what `rebound up` writes on a first start
    if not runs:
        return
    if days:
        click.echo(seed_report_history(runs, days, tasks))
    else:
        click.echo(seed_history(runs, runs // 10 if dead_letters is None else dead_letters))
    # The history is written in the past: roll it up now rather than a day per minute.
    from console.services.reports import rollup

    rollup.rebuild()


@click.group("audit")
def audit_group():
    """Inspect the audit log."""


@audit_group.command("verify")
@with_appcontext
def audit_verify_command():
    """Check the audit chain row by row and against every published anchor; then anchor its head."""
    from console.extensions import db
    from console.services.audit import trail as audit

    report = audit.verify(db.session)
    if not report.ok:
        where = f"row {report.first_bad_seq}" if report.first_bad_seq else "its anchors"
        raise click.ClickException(f"audit chain broken at {where}: {report.problem}")
    legacy = f" ({plural(report.legacy, 'legacy row')} chained before the key)" if report.legacy else ""
    click.echo(f"audit chain intact: {plural(report.checked, 'row')} verified{legacy}, "
               f"{plural(report.anchors, 'anchor')} checked in {report.anchor_file}")


COMMANDS = [up_command, retry_inspect_command, task_dryrun_command, web_command, worker_command, scheduler_command,
            create_user_command, create_token_command, seed_demo_command, audit_group, approvals_group,
            channels_group, recovery_runbook_command, sla_report_command, tenants_group, import_failures_command,
            reservations_group, templates_group, quota_classes_group]


def register(app) -> None:
    """Add the commands to `flask --app app`."""
    for command in COMMANDS:
        app.cli.add_command(command)


def _create_app():
    from console import create_app

    return create_app()


def _schema_missing(error: DBAPIError) -> bool:
    """Tell whether a database error says a table does not exist (SQLite's message, PostgreSQL's SQLSTATE 42P01)."""
    return "no such table" in str(error.orig) or getattr(error.orig, "sqlstate", None) == "42P01"


def main() -> None:
    """Entry point of the `rebound` console script."""
    configure_logging()
    try:
        FlaskGroup(create_app=_create_app, help="Rebound: ops console for background tasks that fail.")(
            prog_name="rebound")
    except DBAPIError as error:
        if not _schema_missing(error):
            raise
        # A command run against a database nobody migrated (or migrated to an older release): say what to do
        # instead of a page of traceback.
        raise SystemExit(f"Error: the database lacks Rebound's tables ({error.orig}). Run `rebound db upgrade` "
                         "first (`rebound up` does it itself).") from None


if __name__ == "__main__":
    main()
