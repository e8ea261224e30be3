"""`rebound tasks …` and `rebound dlq …`: an incident's everyday moves from a terminal, audited as the console's."""

import json

from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry, Run, Task
from console.services.actor import Actor
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
    replayed = cli(app, "dlq", "replay", str(letter_id))
    assert replayed.exit_code == 0 and replayed.output == f"Dead letter #{letter_id}: run #{run_id} replayed.\n"
    db.session.expire_all()
    run = db.session.get(Run, run_id)
    assert (run.status, run.series) == ("pending", 2)
    assert audited("dead_letter.replay") == [("cli", str(letter_id))]
    again = cli(app, "dlq", "replay", str(letter_id), "999")
    assert again.exit_code == 1 and "not replayed (no such open dead letter, or its run is not dead): #" in again.output
    assert json.loads(cli(app, "dlq", "list", "--json").output) == []
