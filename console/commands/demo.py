"""`rebound seed-demo`: demo tenants, tasks and history for a first look, or many runs of history for scale tests."""

import click
from flask import current_app
from flask.cli import with_appcontext


@click.command("seed-demo")
@click.option("--force", is_flag=True, help="Seed even when the database already has tasks.")
@click.option("--runs", type=click.IntRange(0, 100_000_000), default=0,
              help="Also insert this many finished runs of history (scale tests).")
@click.option("--dead-letters", type=click.IntRange(0, 100_000_000), default=None,
              help="How many of those runs are dead (default runs/10).")
@click.option("--days", type=click.IntRange(1, 3660), default=None,
              help="Spread the --runs over this many days as scheduled tasks' firings, with late starts, retries, "
                   "replays, alerts and SLA breaches (for the Reports page).")
@click.option("--tasks", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="How many tasks fire the --days history.")
@with_appcontext
def seed_demo_command(force, runs, dead_letters, days, tasks):
    """Create demo tenants, tasks, runs, a fortnight of report history and a waiting data fix; --runs N instead adds
    N runs of history for scale tests (--days D: over D days, for the Reports page)."""
    from console.services.system import bootstrap, demo
    from console.services.system.demo_history import seed_history
    from console.services.system.demo_reports import seed_report_history

    if days and dead_letters is not None:  # it was ignored without a word (helper 129)
        raise click.UsageError("--dead-letters goes without --days: a --days history's dead letters follow its "
                               "tasks' failure rates (about 2 % of its runs)")
    if dead_letters is not None and dead_letters > runs:  # it was cut to --runs without a word (helper 139)
        raise click.UsageError(f"--dead-letters {dead_letters} is more than the --runs {runs} they are among")
    bootstrap.ensure_ready()  # the runs it creates need the default policies, even before any process ran
    if not force and not demo.is_empty():
        raise click.ClickException("the database already has tasks; use --force to add demo data anyway")
    if not demo.is_seeded() and not current_app.config["DEMO"]:
        # Its tasks name demo.sleep, known in demo mode only: it stopped half-way, tenants and history written and
        # no way to finish (helper 143).
        raise click.ClickException("the demo's tasks use handlers that exist in demo mode only (demo.sleep): run it "
                                   "with REBOUND_DEMO=1, and only where the workers run in demo mode too; nothing "
                                   "was added")
    if not demo.is_seeded():
        click.echo(demo.seed(roles=not runs))  # without --runs: what `rebound up` writes on a first start
    elif not runs:
        # --force on the demo itself was a traceback (its tasks registered twice; helper 109).
        raise click.ClickException("the demo data is here already (tenant acme's tasks); nothing was added. Give "
                                   "--runs N to add history to it")
    else:
        click.echo("The demo data is here already; adding the history only.")
    if not runs:
        return
    if days:
        click.echo(seed_report_history(runs, days, tasks))
    else:
        click.echo(seed_history(runs, runs // 10 if dead_letters is None else dead_letters))
    # The history is written in the past: roll it up now rather than a day per minute.
    from console.services.reports import rollup

    rollup.rebuild()
