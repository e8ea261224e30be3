"""`rebound import-failures`: bring failures from before Rebound (RQ's failed jobs, a JSON-lines file) into its DLQ."""

from collections import Counter

import click
from flask.cli import with_appcontext

from console.commands.terminal import cli_actor
from console.domain.words import plural


@click.command("import-failures")
@click.option("--redis-url", default=None, help="Read RQ's FailedJobRegistry in this Redis.")
@click.option("--queue", "queues", multiple=True, help="Only this RQ queue (repeatable; default every queue).")
@click.option("--file", "path", default=None, type=click.Path(dir_okay=False),
              help="Read a JSON-lines file of failures (format in the README).")
@click.option("--map", "maps", multiple=True, metavar="FUNCTION=HANDLER",
              help="Replay FUNCTION's jobs through a Rebound handler, e.g. app.tasks.send=python:mail.send "
                   "(repeatable). A function with none is refused.")
@click.option("--tenant", default=None, help="Tenant of jobs that name none (default: the default tenant).")
@click.option("--remap", is_flag=True,
              help="Jobs imported before whose --map has changed: their open letters replay through the handler "
                   "--map names now (without it, such an import is refused).")
@click.option("--dry-run", is_flag=True, help="Print what would be imported; write nothing.")
@with_appcontext
def import_failures_command(redis_url, queues, path, maps, tenant, remap, dry_run):
    """Import failed jobs as dead runs with dead letters, grouped like any other; a second import adds nothing."""
    from console.extensions import db
    from console.services.dlq import import_sources, importer
    from console.services.errors import ServiceError
    from console.services.system import bootstrap

    if (redis_url is None) == (path is None):
        raise click.UsageError("give exactly one of --redis-url or --file")
    if queues and redis_url is None:
        raise click.UsageError("--queue goes with --redis-url")
    try:
        mapping = importer.parse_mapping(list(maps))
        failures = (import_sources.read_rq(redis_url, list(queues)) if redis_url
                    else import_sources.read_jsonl(path))
        if not dry_run:
            # The default tenant and policy exist once Rebound has started; an import may come first.
            bootstrap.ensure_ready()
        source = failures[0].source if failures else ("rq" if redis_url else "jsonl")
        plan = importer.plan(failures, source, mapping, tenant)
        before = importer.imported_before(plan)
        fresh = [failed for failed in failures if importer.key_of(failed) not in before]
        remaps = importer.remaps(plan, before)
        _say_unused_maps(mapping, plan)
        if dry_run:
            _print_plan(plan, before, remaps)
            _say_args_as_text(fresh)
            if plan.unmapped:  # exit 0 told a script the real import would go through (helper 109)
                raise click.ClickException("the import would be refused: give a --map for each function above")
            if not remap and any(found.letter == "open" for found in remaps):
                raise click.ClickException("the import would be refused: give --remap, or correct --map")
            return
        done = importer.run_import(plan, cli_actor(), remap=remap)
    except ServiceError as error:
        db.session.rollback()
        raise click.ClickException(f"refused ({error.code}, {error.status}): {error.detail}") from None
    click.echo(f"Imported {plural(done.imported, 'failed job')} as dead letters in "
               f"{plural(done.work_orders, 'work order')}; {done.already} {'was' if done.already == 1 else 'were'} "
               "imported before.")
    if done.remapped:
        click.echo(f"Remapped {plural(done.remapped, 'open dead letter')} imported before (not replayed): "
                   f"{importer.remap_words([found for found in remaps if found.letter == 'open'])}; now as --map says.")
    _say_closed_remaps(remaps)
    _say_args_as_text(fresh)


def _say_unused_maps(mapping: dict, plan) -> None:
    """Name a --map whose function no job read has: a typo, beside the real function left without one."""
    unused = sorted(set(mapping) - set(plan.by_function))
    if unused:
        click.echo(f"Note: no job read has the function of --map {', '.join(unused)} (a typo?); the functions read "
                   f"are {', '.join(sorted(plan.by_function)) or 'none'}.")


def _say_closed_remaps(remaps) -> None:
    from console.services.dlq import importer

    closed = [found for found in remaps if found.letter != "open"]
    if closed:
        click.echo(f"Left as they are (their letters are no longer open: replayed, discarded or resolved): "
                   f"{importer.remap_words(closed)}.")


def _say_args_as_text(failures, shown: int = 10) -> None:
    """Name the jobs whose arguments JSON cannot hold: their params keep a Python repr, which a replay passes on."""
    found = [failed for failed in failures if failed.as_text]
    if not found:
        return
    click.echo(f"Warning: {plural(len(found), 'job')} {'has' if len(found) == 1 else 'have'} arguments JSON cannot "
               "hold, kept as their Python repr (text) in the params a replay gets; fix those params before "
               "replaying (DLQ → Fix params…), or map them to a handler that reads the text:")
    for failed in found[:shown]:
        click.echo(f"  {failed.job_id}: {', '.join(failed.as_text)}")
    if len(found) > shown:
        click.echo(f"  … and {len(found) - shown} more")


def _print_plan(plan, before: dict, remaps: list) -> None:
    from console.services.dlq import importer

    total, already = sum(plan.by_function.values()), len(before)
    click.echo(f"Dry run: {plural(total, 'failed job')} read from {plan.source} (nothing written); {already} of "
               f"them {'was' if already == 1 else 'were'} imported before and would be skipped.")
    fresh = [(failed, tenant_id) for failed, _, tenant_id in plan.items] + plan.waiting_for_map
    tenants = Counter(tenant_id for failed, tenant_id in fresh if importer.key_of(failed) not in before)
    unmapped = Counter(tenant_id for failed, tenant_id in plan.waiting_for_map
                       if importer.key_of(failed) not in before)
    # A misspelt tenant field, or the wrong --tenant, shows here before anything is written: the jobs still without
    # a --map too, whose tenant is known already (helper 156).
    names = importer.tenant_names(tenants)
    click.echo("Into tenants: " + (", ".join(
        f"{names[t]} ({n}" + (f", {unmapped[t]} of them without a --map yet" if unmapped[t] else "") + ")"
        for t, n in sorted(tenants.items())) or "none (every job was imported before)"))
    click.echo("By function:")
    for function, count in sorted(plan.by_function.items()):
        note = "  (no --map: refused)" if function in plan.unmapped else ""
        click.echo(f"  {count:6d}  {function}{note}")
    # The fingerprint is the error's (its type and message): two functions failing alike share one DLQ group.
    click.echo("By function and error group (function, error, fingerprint; the DLQ groups by error alone):")
    for (function, code, fingerprint), count in sorted(plan.by_group.items()):
        click.echo(f"  {count:6d}  {function}  {code}  {fingerprint}")
    if plan.unmapped:
        click.echo("Without a --map the import would be refused: "
                   + ", ".join(f"{f} ({n})" for f, n in sorted(plan.unmapped.items())))
    open_ones = [found for found in remaps if found.letter == "open"]
    if open_ones:
        click.echo(f"Imported before under another handler, letters open: {importer.remap_words(open_ones)}; "
                   "--remap points their runs and open letters at the handler --map names now (it replays nothing).")
    _say_closed_remaps(remaps)
