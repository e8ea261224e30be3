"""Runbooks for dead letters: replay by filter at a rate, mark runs resolved, fix a run's params and replay it."""

import json

from sqlalchemy import select

from console.domain import saga
from console.domain.notes import MAX_NOTE_CHARS
from console.domain.runbooks import Param, Risk
from console.domain.runbooks import ParamType as T
from console.extensions import db
from console.models import DeadLetter, Run
from console.services import inputs
from console.services.audit import trail as audit
from console.services.dlq import bulk, discards
from console.services.dlq import groups as dlq
from console.services.dlq import resolve as resolving
from console.services.dlq.filters import AGES, FINGERPRINT, Filters
from console.services.engine import handler_kinds, replays, waiting_fixes
from console.services.errors import Conflict
from console.services.inputs import MAX_PARAMS_BYTES
from console.services.recovery import params_fix
from console.services.recovery.runbook_registry import Runbook
from console.services.recovery.workflows import words as workflow_words
from console.services.workorders import changes as work_orders

CHUNK = 100


def _filters(params: dict) -> Filters:
    task = str(params["task"]) if params["task"] else (
        "handler:{}:{}".format(*handler_kinds.parse(params["handler"])) if params["handler"] else "")
    return Filters(q=params["search"], task=task, code=params["code"], group=params["group"],
                   age="" if params["age"] == "any" else params["age"], status="open")


def _check_replay(values: dict, now) -> dict:
    if values["task"] and values["handler"]:
        return {"handler": "give a task or a handler, not both"}
    if values["group"] and not FINGERPRINT.fullmatch(values["group"]):
        # Any text was taken and matched nothing: "0 dead letters" read as an empty group (helper 155).
        return {"group": "group is an error group's fingerprint: up to 32 hex digits, from the DLQ page"}
    return {}


NARROWING = ("code", "handler", "task", "search", "group", "limit")


def _narrowed_or_every(doing: str):
    """Refuse a real run that no filter narrows unless `every` says so, as the API's bulk replay does: left empty,
    the form replayed every open dead letter of every tenant it may act for."""
    def check(values: dict, now) -> dict:
        if values["every"] or values["age"] != "any" or any(values[name] for name in NARROWING):
            return {}
        return {"every": f"no filter narrows this {doing}: give a code, handler, task, search, age, group or limit, "
                         f"or set every to {doing} every open dead letter (tick it in the form; --param every=true "
                         "on the command line)"}
    return check


def replay_dead_letters(ctx) -> None:
    """Replay the open dead letters that match, oldest first, at most `rate` a second."""
    params, filters = ctx.params, _filters(ctx.params)
    rate, limit = params["rate"], params["limit"]
    bounds = dlq.bounds(filters, ctx.tenant_id, ctx.now)
    total = dlq.count_matching(filters, ctx.tenant_id, cap=None, bounds=bounds) if bounds else 0
    wanted = min(total, limit) if limit else total
    ctx.log(filters.describe(count=total) + (f"; replaying the oldest {wanted}" if wanted < total else "") + ".")
    if not wanted:
        return
    steps = dlq.workflow_steps(filters, ctx.tenant_id, bounds)
    if steps.steps:  # the console's confirm page says the same before a bulk replay
        ctx.log(f"{steps.steps:,}{'+' if steps.steps > dlq.COUNT_CAP else ''} of them "
                + saga.steps_replay_words(steps.steps, steps.undo_failed))
    if not ctx.dry_run:
        ctx.log(f"At {rate:g} per second that takes about {max(1, round(wanted / rate))} s.")
    # A real run takes at most a second's worth per chunk (the pace); a dry-run reads in full chunks.
    size = CHUNK if ctx.dry_run else max(1, min(CHUNK, int(rate)))
    after_id, seen, replayed = 0, 0, 0
    started = ctx.monotonic()
    while seen < wanted:
        batch = dlq.matching_ids(filters, ctx.tenant_id, bounds, after_id, min(size, wanted - seen))
        if not batch:
            break
        if not ctx.dry_run:  # a dry-run only reads: it need not spare anything
            # Pace before each chunk: chunk n starts no earlier than (letters so far) / rate after the start.
            ctx.sleep(started + seen / rate - ctx.monotonic())
        after_id, seen = batch[-1], seen + len(batch)
        restart = None if ctx.dry_run else replays.restart(batch, ctx.actor, tenant_id=ctx.tenant_id, now=ctx.now)
        rows = replays.replayable(batch, ctx.tenant_id) if restart is None else restart.rows
        for row in rows:
            ctx.backup("run", row.id, {"status": row.status, "series": row.series, "attempt": row.attempt,
                                       "error_code": row.error_code})
            ctx.change("dead_letter", row.letter_id, "status", "open", "replayed")
            ctx.change("run", row.id, "status", "dead", "pending")
        ctx.commit()
        if not ctx.dry_run:
            replays.enqueue(rows)
        replayed += len(rows)
        left_alone = len(batch) - len(rows)
        span = f"#{batch[0]}" if len(batch) == 1 else f"#{batch[0]}–#{batch[-1]}"
        closed = waiting_fixes.closed_words(restart.closed_fixes) if restart else ""
        ctx.log(f"{'Would replay' if ctx.dry_run else 'Replayed'} {len(rows)} ({span})"
                + (f", {left_alone} no longer open or their run not dead" if left_alone else "")
                + (f"; {closed}" if closed else "") + f"; {seen} of {wanted} done.")
    ctx.log(f"{replayed} dead letter{'s' if replayed != 1 else ''} {'would be ' if ctx.dry_run else ''}replayed.")


def discard_dead_letters(ctx) -> None:
    """Discard the open dead letters that match, oldest first, with the reason: each audited, their work orders
    closing once none is left open."""
    params, filters = ctx.params, _filters(ctx.params)
    limit = params["limit"]
    bounds = dlq.bounds(filters, ctx.tenant_id, ctx.now)
    total = dlq.count_matching(filters, ctx.tenant_id, cap=None, bounds=bounds) if bounds else 0
    wanted = min(total, limit) if limit else total
    ctx.log(filters.describe(count=total) + (f"; discarding the oldest {wanted}" if wanted < total else "") + ".")
    after_id, seen, discarded, settled = 0, 0, 0, []
    while seen < wanted and (batch := dlq.matching_ids(filters, ctx.tenant_id, bounds, after_id,
                                                       min(CHUNK, wanted - seen))):
        after_id, seen = batch[-1], seen + len(batch)
        # Guarded: a letter replayed or discarded by someone else since is left as it is (and not listed).
        done = batch if ctx.dry_run else discards.discard_open(batch, params["reason"], ctx.actor, ctx.now,
                                                              tenant_id=ctx.tenant_id).ids
        settled += done
        for letter_id in done:
            ctx.backup("dead_letter", letter_id, {"status": "open", "resolved_at": None, "resolved_by": None,
                                                  "resolution_note": None})
            ctx.change("dead_letter", letter_id, "status", "open", "discarded")
        ctx.commit()
        discarded += len(done)
        left_alone = len(batch) - len(done)
        ctx.log(f"{'Would discard' if ctx.dry_run else 'Discarded'} {len(done)}"
                + (f", {left_alone} no longer open" if left_alone else "") + f"; {seen} of {wanted} done.")
    ctx.log(f"{discarded} dead letter{'s' if discarded != 1 else ''} {'would be ' if ctx.dry_run else ''}discarded.")
    # The delivery round closes them, not this runbook: said, as it follows from the discards (helper 160).
    if closing := work_orders.closing_with(settled):
        ctx.log(f"Left with no dead letter to settle, work order{'s' if len(closing) != 1 else ''} "
                f"{', '.join(f'#{order_id}' for order_id in closing)} {'would close' if ctx.dry_run else 'close'} "
                "within a minute (the delivery round closes them, sending their resolve).")


def _say_workflow_steps(ctx, run_ids, words) -> None:
    """Log, for each run that is a saga workflow's step, what the runbook does to its workflow (the approver reads
    the dry-run's log before deciding)."""
    for run in db.session.execute(select(Run).where(Run.id.in_(list(run_ids)), Run.workflow_id.is_not(None))
                                  .order_by(Run.id)).scalars():
        ctx.log(words(run))


def _only_dead_runs(values: dict, now) -> dict:
    """Refuse a real run naming a run that is not dead: its approver read the run in the list and one change fewer,
    and only the execution's log said it was left alone (a dry-run still lists what it would skip)."""
    skipped = resolving.plan(values["runs"], None).skipped
    if not skipped:
        return {}
    said = "; ".join(f"run {run_id}: {why}" for run_id, why in list(skipped.items())[:5])
    more = f" (and {len(skipped) - 5} more)" if len(skipped) > 5 else ""
    return {"runs": f"{said}{more}; leave {'it' if len(skipped) == 1 else 'them'} out"}


def resolve_runs(ctx) -> None:
    """Mark dead runs resolved with a note: their open dead letters close, and work orders left with none."""
    chosen = resolving.plan(ctx.params["runs"], ctx.tenant_id)
    for run_id, why in chosen.skipped.items():
        ctx.log(f"Run #{run_id} left alone: {why}.")
    if not chosen.runs:
        ctx.log("No dead run to resolve.")
        return
    _say_workflow_steps(ctx, chosen.runs, workflow_words.workflow_resolve)
    done = chosen if ctx.dry_run else resolving.resolve(chosen, ctx.params["note"], ctx.actor, ctx.now)
    if not ctx.dry_run:
        for run_id, why in done.skipped.items():
            if run_id not in chosen.skipped:
                ctx.log(f"Run #{run_id} left alone: {why}.")
    for run_id in done.runs:
        ctx.backup("run", run_id, {"status": "dead"})
        ctx.change("run", run_id, "status", "dead", "resolved")
    for letter in done.letters:
        ctx.backup("dead_letter", letter.id, {"status": "open", "resolved_at": None, "resolved_by": None,
                                              "resolution_note": None})
        ctx.change("dead_letter", letter.id, "status", "open", "resolved")
    for order_id, status in done.closing.items():
        ctx.backup("work_order", order_id, {"status": status})
        ctx.change("work_order", order_id, "status", status, "closed")
    ctx.commit()
    verb = "would be" if ctx.dry_run else "are"
    closed = waiting_fixes.closed_words(done.closed_fixes)
    ctx.log(f"{len(done.runs)} run(s) {verb} resolved, {len(done.letters)} dead letter(s) closed, "
            f"{len(done.closing)} work order(s) closed" + (f"; {closed}." if closed else "."))


def _new_params(raw: str):
    value = inputs.json_text(raw)
    if not isinstance(value, dict):
        raise ValueError("a JSON object, like {\"account\": 42}")
    if len(json.dumps(value).encode()) > MAX_PARAMS_BYTES:
        raise ValueError(f"larger than {MAX_PARAMS_BYTES // 1024} KB")
    return value


def _check_fix(values: dict, now) -> dict:
    try:
        _new_params(values["params"])
    except ValueError as error:
        return {"params": str(error)}
    return {}


def _no_fix_waiting(values: dict, now) -> dict:
    """Refuse a real fix while another of the letter waits: the first to run changes the params the others read."""
    waiting = params_fix.any_fix_waiting(values["dead_letter"], now)
    if waiting is None:
        return {}
    return {"dead_letter": f"request #{waiting} to fix dead letter #{values['dead_letter']} already waits for "
                           "approval; only one fix of a letter waits at a time"}


def fix_params_and_replay(ctx) -> None:
    """Give a dead letter's run new params (all of them, or merged over the old ones) and replay it."""
    letter = db.session.get(DeadLetter, ctx.params["dead_letter"])
    if letter is None or (ctx.tenant_id is not None and letter.tenant_id != ctx.tenant_id):
        raise Conflict(f"dead letter #{ctx.params['dead_letter']} is gone")
    run = db.session.get(Run, letter.run_id)
    if letter.status != "open" or run.status != "dead":
        raise Conflict(f"dead letter #{letter.id} is {letter.status} and its run #{run.id} is {run.status}: only an "
                       "open dead letter of a dead run can be fixed and replayed")
    given = _new_params(ctx.params["params"])
    _say_workflow_steps(ctx, [run.id], workflow_words.workflow_replay)
    before = dict(run.params or {})
    after = {**before, **given} if ctx.params["merge"] else given
    if after == before:
        raise Conflict("these are the params the run already has; change at least one")
    ctx.log(f"Run #{run.id} ({run.handler}): params {json.dumps(before, sort_keys=True)} → "
            f"{json.dumps(after, sort_keys=True)}.")
    if not ctx.dry_run:
        restarted = params_fix.restart_with(run.id, letter.id, before, after, ctx.actor, ctx.now,
                                            message=f"runbook execution #{ctx.execution_id}")
        audit.record(db.session, ctx.actor, "run.params_fix", "run", run.id, before={"params": before},
                     after={"params": after, "runbook_execution": ctx.execution_id}, tenant=letter.tenant.name,
                     note=ctx.reason, clock=ctx.clock)
    ctx.backup("run", run.id, {"params": before, "status": "dead"})
    ctx.change("run", run.id, "params", before, after)
    ctx.change("dead_letter", letter.id, "status", "open", "replayed")
    ctx.change("run", run.id, "status", "dead", "pending")
    ctx.commit()
    if not ctx.dry_run:
        replays.enqueue(restarted)
        ctx.log(f"Replayed run #{run.id} with the new params (series {restarted[0].series + 1}).")
    else:
        ctx.log(f"Would replay run #{run.id} with the new params.")


REPLAY = Runbook(
    "replay_dead_letters", "Replay dead letters by filter",
    "Replay every open dead letter that matches the filters, oldest first, at a steady rate; each replay restarts "
    "its run as a new attempt series under the same idempotency key.", Risk.MEDIUM, (
        Param("code", T.STR, help="Only dead letters with this error code, e.g. carrier_down.", max_length=80),
        Param("handler", T.STR, help="Only this handler, as stored: python:demo.flaky.", max_length=120),
        Param("task", T.TASK, help="Only dead letters of this task (its id)."),
        Param("search", T.STR, help="Words in the error message (searches the newest 10,000).", max_length=200),
        Param("age", T.CHOICE, default="any", choices=("any", *AGES), help="Only dead letters older than this."),
        Param("group", T.STR, help="Only this error group (its fingerprint, from the DLQ page).", max_length=32),
        Param("rate", T.FLOAT, default=float(bulk.DEFAULT_RATE), minimum=1, maximum=bulk.MAX_RATE,
              help="Dead letters replayed per second."),
        Param("limit", T.INT, minimum=1, help="Replay at most this many (the oldest); all when empty."),
        Param("every", T.BOOL, default=False,
              help="With no filter above, replay every open dead letter (a dry-run lists them without it)."),
    ), replay_dead_letters, check=_check_replay, real_check=_narrowed_or_every("replay"))

DISCARD = Runbook(
    "discard_dead_letters", "Discard dead letters by filter",
    "Discard every open dead letter that matches the filters, oldest first, with a reason: each is audited, its run "
    "stays dead, and a work order left with no open dead letter closes. Past the hourly allowance of the DLQ's own "
    "discard, so a second person approves it.", Risk.HIGH, (
        *REPLAY.params[:6],
        Param("limit", T.INT, minimum=1, help="Discard at most this many (the oldest); all when empty."),
        Param("every", T.BOOL, default=False,
              help="With no filter above, discard every open dead letter (a dry-run lists them without it)."),
        Param("reason", T.STR, required=True, max_length=MAX_NOTE_CHARS,
              help="Why they need no replay; kept on each dead letter and in the audit log."),
    ), discard_dead_letters, check=_check_replay, real_check=_narrowed_or_every("discard"))

RESOLVE = Runbook(
    "resolve_runs", "Mark dead runs resolved",
    "A person decided these dead runs need no replay: each run ends 'resolved', its open dead letters close with "
    "the note, and a work order left with no open dead letter closes too.", Risk.HIGH, (
        Param("runs", T.RUN, required=True, many=True, help="Run ids, separated by commas or spaces."),
        Param("note", T.STR, required=True, max_length=MAX_NOTE_CHARS,
              help="Why they need no replay; kept on each dead letter."),
    ), resolve_runs, real_check=_only_dead_runs)

FIX_PARAMS = Runbook(
    params_fix.FIX_RUNBOOK, "Fix a run's params and replay it",
    "Give the run of an open dead letter new params, then replay it (a new attempt series, same idempotency key).",
    Risk.HIGH, (
        Param("dead_letter", T.DEAD_LETTER, required=True, help="The dead letter's id."),
        Param("params", T.STR, required=True, max_length=MAX_PARAMS_BYTES, json_object=True,
              help='A JSON object: the keys to change (merge), or all the new params, e.g. {"account": 43}.'),
        Param("merge", T.BOOL, default=True, help="Merge over the run's params; off: replace them whole."),
    ), fix_params_and_replay, check=_check_fix, real_check=_no_fix_waiting)
