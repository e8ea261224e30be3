"""`rebound tasks …` and `rebound dlq …`: an incident's everyday moves from a terminal, audited as the console's."""

import json

from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry, Run, Task
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.people import tenants
from console.services.scheduling import tasks
from tests.factories import make_tenant


def cli(app, *args):
    return app.test_cli_runner().invoke(args=list(args))


def audited(action: str) -> list[tuple[str, str]]:
    db.session.expire_all()
    return [(row.actor, row.target_id) for row in db.session.execute(
        select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.seq)).scalars()]


def test_tasks_are_listed_paused_resumed_and_run_now_audited(app):
    make_tenant("acme")
    nightly = tasks.register(tenants.find("acme"), {"name": "nightly", "handler": "demo.noop", "cron": "30 2 * * *"},
                             Actor("test"))
    listed = cli(app, "tasks", "list", "--json")
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.output)
    assert (row["id"], row["tenant"], row["name"], row["cron"], row["paused"]) == (nightly.id, "acme", "nightly",
                                                                                  "30 2 * * *", False)
    assert row["next_firing"].endswith("T02:30:00+00:00")
    said = f"Task #{nightly.id} acme/nightly"
    assert cli(app, "tasks", "pause", str(nightly.id)).output == f"{said} paused.\n"
    assert cli(app, "tasks", "pause", str(nightly.id)).output == f"{said} was paused already.\n"
    assert db.session.get(Task, nightly.id).paused
    assert json.loads(cli(app, "tasks", "list", "--paused", "--json").output)[0]["next_firing"] is None
    assert cli(app, "tasks", "list", "--active", "--json").output.strip() == "[]"
    both = cli(app, "tasks", "list", "--paused", "--active")  # the last given won without a word (helper 139)
    assert both.exit_code == 2 and "give --paused or --active, not both" in both.output
    assert cli(app, "tasks", "resume", str(nightly.id)).exit_code == 0
    ran = cli(app, "tasks", "trigger", str(nightly.id))
    [run] = db.session.execute(select(Run).where(Run.task_id == nightly.id)).scalars().all()
    assert ran.output == f"Task #{nightly.id} acme/nightly: run #{run.id} created.\n"
    assert (audited("task.pause"), audited("task.resume"), audited("task.trigger")) == (
        [("cli", str(nightly.id))], [("cli", str(nightly.id))], [("cli", str(nightly.id))])
    missing = cli(app, "tasks", "pause", "999")
    assert missing.exit_code == 2 and "no task with id 999" in missing.output
    assert cli(app, "tasks", "list", "--tenant", "nope").exit_code == 2


def test_open_dead_letters_are_listed_and_replayed_by_id_audited(app, dead_run):
    run_id, letter_id = dead_run()
    listed = cli(app, "dlq", "list", "--code", "bad_account", "--json")
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.output)
    assert (row["id"], row["run_id"], row["tenant"], row["error_code"]) == (letter_id, run_id, "default", "bad_account")
    assert json.loads(cli(app, "dlq", "list", "--code", "other", "--json").output) == []
    # As the API's filters and the DLQ page take them: a code in any case, a bare handler name (helper 158).
    for narrowed in (("--code", "BAD_ACCOUNT"), ("--handler", "demo.flaky"), ("--handler", "python:demo.flaky")):
        assert [row["id"] for row in json.loads(cli(app, "dlq", "list", *narrowed, "--json").output)] == [letter_id]
    assert json.loads(cli(app, "dlq", "list", "--handler", "command:demo.flaky", "--json").output) == []
    wrong = cli(app, "dlq", "list", "--handler", "perl:x")
    assert wrong.exit_code == 2 and "handler must be python:<name>" in wrong.output
    replayed = cli(app, "dlq", "replay", str(letter_id))
    assert replayed.exit_code == 0 and replayed.output == f"Dead letter #{letter_id}: run #{run_id} replayed.\n"
    db.session.expire_all()
    run = db.session.get(Run, run_id)
    assert (run.status, run.series) == ("pending", 2)
    assert audited("dead_letter.replay") == [("cli", str(letter_id))]
    again = cli(app, "dlq", "replay", str(letter_id), "999")
    assert again.exit_code == 1 and "not replayed (no such open dead letter, or its run is not dead): #" in again.output
    assert json.loads(cli(app, "dlq", "list", "--json").output) == []


def test_runs_are_listed_filtered_and_shown_with_their_timeline(app, dead_run, runs, clock):
    run_id, letter_id = dead_run(api_key="sk_live_never_shown")
    other = runs.submit("demo.noop", {}, tenant="default")
    listed = cli(app, "runs", "list", "--status", "dead", "--json")
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.output)["runs"]
    assert (row["id"], row["status"], row["tenant"], row["error"]["code"]) == (run_id, "dead", "default",
                                                                                 "bad_account")
    both = json.loads(cli(app, "runs", "list", "--status", "dead,pending", "--json").output)
    assert [r["id"] for r in both["runs"]] == [other, run_id] and both["next_before"] is None
    first = json.loads(cli(app, "runs", "list", "--limit", "1", "--json").output)
    assert [r["id"] for r in first["runs"]] == [other] and first["next_before"] == other
    older = json.loads(cli(app, "runs", "list", "--before", str(other), "--json").output)
    assert [r["id"] for r in older["runs"]] == [run_id]
    table = cli(app, "runs", "list", "--code", "bad_account").output.splitlines()
    assert table[0].split()[:4] == ["id", "tenant", "task", "handler"] and len(table) == 2
    assert table[1].split()[:2] == [str(run_id), "default"] and "bad_account" in table[1]
    shown = cli(app, "runs", "show", str(run_id))
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert f"Run #{run_id} · default · python:demo.flaky" in text and "status: dead" in text
    assert "error: bad_account: account 42 is closed" in text
    assert f"dead letters: #{letter_id} open" in text
    assert "running → dead" in text and "sk_live_never_shown" not in text
    as_json = json.loads(cli(app, "runs", "show", str(run_id), "--json").output)
    assert as_json["id"] == run_id and [e["to"] for e in as_json["events"]][-1] == "dead"
    assert "sk_live_never_shown" not in json.dumps(as_json)  # secret-named params masked, as a viewer's page
    # A replay's own start, as the Runs page gives it: series 1's beside series 2's end read as one long run.
    assert "started" in text and "series 2" not in text
    cli(app, "dlq", "replay", str(letter_id))
    assert execute(run_id, 0, clock=clock) == "dead"
    again = cli(app, "runs", "show", str(run_id)).output
    assert "series 2 started" in again and " started 20" not in again.replace("series 2 started", "")


def test_a_list_that_matches_nothing_prints_its_header_not_a_traceback(app):
    """`runs list --code nosuchcode` and `audit list --actor zzz` crashed in the table (helper 128)."""
    for command in (("runs", "list", "--code", "nosuchcode"), ("audit", "list", "--actor", "zzz"),
                    ("dlq", "list", "--code", "none"), ("tasks", "list")):
        done = cli(app, *command)
        assert done.exit_code == 0, done.output
        assert len(done.output.splitlines()) == 1 and done.output.split()[0] in ("id", "seq"), done.output
    unknown = cli(app, "audit", "list", "--tenant", "nope")
    assert unknown.exit_code == 2 and "no tenant named 'nope'" in unknown.output


def test_runs_commands_refuse_what_they_cannot_read(app):
    assert "no run with id 999" in cli(app, "runs", "show", "999").output
    wrong = cli(app, "runs", "list", "--status", "deadd")
    assert wrong.exit_code == 2 and "'deadd' is none of pending" in wrong.output
    assert cli(app, "runs", "list", "--tenant", "nope").exit_code == 2
    assert cli(app, "runs", "list", "--limit", "0").exit_code == 2
    assert cli(app, "runs", "list", "--before", "9" * 400).exit_code == 2
    unknown = cli(app, "runs", "list", "--task", "999999")  # an empty table read as "it never ran"
    assert unknown.exit_code == 2 and "no task with id 999999" in unknown.output


def test_the_audit_log_is_searched_from_a_terminal(app, dead_run):
    _, letter_id = dead_run()
    cli(app, "dlq", "replay", str(letter_id))
    found = cli(app, "audit", "list", "--action", "dead_letter.", "--json")
    assert found.exit_code == 0, found.output
    [row] = json.loads(found.output)
    assert (row["actor"], row["action"], row["target_type"], row["target_id"]) == (
        "cli", "dead_letter.replay", "dead_letter", str(letter_id))
    table = cli(app, "audit", "list", "--actor", "cli").output.splitlines()
    assert table[0].split()[:4] == ["seq", "at", "actor", "action"] and "dead_letter.replay" in table[1]
    assert cli(app, "audit", "list", "--actor", "nobody").output.splitlines()[1:] == []
    refused = cli(app, "audit", "list", "--since", "2026-13-01")
    assert refused.exit_code == 2 and "--since 2026-13-01 is not a day: write it as YYYY-MM-DD" in refused.output
    later = cli(app, "audit", "list", "--since", "2999-01-01", "--json")
    assert later.exit_code == 0 and json.loads(later.output) == []
