"""`rebound recovery-runbook`: the same code as a worker runs, in this process, printing the same log."""

from sqlalchemy import select

from console.extensions import db
from console.models import Approval, Run, RunbookExecution
from console.services.engine.execute import execute
from console.services.recovery import runbooks
from tests.factories import Runs


def cli(app, *args):
    return app.test_cli_runner().invoke(args=["recovery-runbook", *args])


def test_list_names_each_runbook_with_its_risk_and_params(app):
    result = cli(app, "--list")
    assert result.exit_code == 0, result.output
    assert "resolve_runs  [high risk, needs approval]" in result.output
    assert "engine_reconcile  [low risk, runs when asked, whole system]" in result.output
    assert "--param rate=…  float, optional; default 50.0; Dead letters replayed per second." in result.output


def test_a_dry_run_prints_its_log_line_by_line_and_changes_nothing(app, dead_run, snapshot):  # noqa: F811
    dead_run()
    before = snapshot()
    result = cli(app, "replay_dead_letters", "--param", "code=bad_account", "--param", "rate=20", "--dry-run")
    assert result.exit_code == 0, result.output
    assert snapshot() == before
    [execution] = db.session.execute(select(RunbookExecution)).scalars().all()
    printed = result.output.splitlines()
    link = f"http://127.0.0.1:8000/runbooks/executions/{execution.id}"
    assert printed[0] == f"Execution #{execution.id} of replay_dead_letters: {link}"
    assert printed[1:] == execution.log.splitlines()  # the same log the page shows
    assert printed[-1].endswith("Dry-run done: 2 changes would be made.")
    assert execution.requested_by == "cli" and execution.dry_run


def test_a_real_run_as_a_person_does_the_work(app, dead_run, staff):  # noqa: F811
    run_id, _ = dead_run()
    result = cli(app, "replay_dead_letters", "--param", "code=bad_account", "--as", "olga", "--reason", "fixed")
    assert result.exit_code == 0, result.output
    assert "Done: 2 changes made." in result.output
    db.session.expire_all()
    assert db.session.get(Run, run_id).status == "pending"
    assert db.session.execute(select(RunbookExecution.requested_by)).scalar_one() == "olga (cli)"


def test_a_reader_that_goes_stops_the_printing_not_the_run(app, dead_run, staff, monkeypatch):  # noqa: F811
    # `… | head -3`: the line that met the closed pipe failed the runbook part-way, its execution left running until
    # the reconciler called it a lost worker (helper 109).
    run_id, _ = dead_run()
    printed = []

    def head(line, *args, **kwargs):
        if len(printed) == 2:
            raise BrokenPipeError(32, "Broken pipe")
        printed.append(line)

    monkeypatch.setattr("console.commands.runbooks.click.echo", head)
    result = cli(app, "replay_dead_letters", "--param", "code=bad_account", "--as", "olga", "--reason", "fixed")
    assert result.exit_code == 0, result.output
    assert len(printed) == 2
    db.session.expire_all()
    [execution] = db.session.execute(select(RunbookExecution)).scalars().all()
    assert execution.status == "succeeded" and "Done: 2 changes made." in execution.log
    assert db.session.get(Run, run_id).status == "pending"


def test_bad_params_say_what_to_fix_and_start_nothing(app):
    result = cli(app, "backfill_task", "--param", "task=x", "--dry-run")
    assert result.exit_code == 1
    assert "nothing was started:" in result.output and "--param task: an id (a whole number)" in result.output
    assert "--param start: required" in result.output
    assert cli(app, "backfill_task", "--param", "task").exit_code == 2  # not name=value
    twice = cli(app, "backfill_task", "--param", "task=1", "--param", "task=2", "--dry-run")
    assert twice.exit_code == 2 and "task is given twice; give it once" in twice.output
    assert "no runbook named 'nope'" in cli(app, "nope").output
    # --reason beside a runbook's own reason param says which is which (helper 167).
    both = cli(app, "discard_dead_letters", "--reason", "cli walk", "--dry-run")
    assert both.exit_code == 1 and "--param reason: required" in both.output
    assert "this runbook's own reason is --param reason=..." in both.output
    assert db.session.execute(select(RunbookExecution)).first() is None


def test_a_real_run_that_needs_approval_files_the_request_and_prints_the_preview(app, dead_run, staff):  # noqa: F811
    run_id, _ = dead_run()
    anonymous = cli(app, "resolve_runs", "--param", f"runs={run_id}", "--param", "note=paid", "--reason", "r")
    assert anonymous.exit_code == 1 and "add --as USERNAME" in anonymous.output
    result = cli(app, "resolve_runs", "--param", f"runs={run_id}", "--param", "note=paid", "--reason", "refunded",
                 "--as", "olga")
    assert result.exit_code == 0, result.output
    [execution] = db.session.execute(select(RunbookExecution)).scalars().all()
    assert "Preview for the approver" in result.output and "Preview done: 3 changes" in result.output
    assert f"Approval request #{execution.approval_id} is filed" in result.output
    db.session.expire_all()
    assert db.session.get(Run, run_id).status == "dead"  # nothing ran
    approval = db.session.get(Approval, execution.approval_id)
    letter, order = (row.object_id for row in runbooks.changes(execution.id, planned=True)[0][1:])
    assert approval.after == {f"run #{run_id} status": "resolved", f"dead_letter #{letter} status": "resolved",
                              f"work_order #{order} status": "closed"}


def test_a_real_run_whose_preview_finds_nothing_says_so_and_files_nothing_to_approve(app, staff, clock):  # noqa: F811
    run_id = Runs().submit("demo.noop", {})
    assert execute(run_id, 0, clock=clock) == "succeeded"  # nothing finished a year ago
    result = cli(app, "purge_finished_runs", "--param", "older_than_days=365", "--reason", "tidy", "--as", "olga")
    assert result.exit_code == 0, result.output
    assert "Nothing to approve: its dry-run found nothing to change" in result.output
    assert "is filed; once another person approves it" not in result.output


def test_as_a_viewer_is_refused(app, staff):  # noqa: F811
    from console.services.actor import Actor
    from console.services.people import users

    users.create("vic", "viewer", "correct-horse-battery", Actor("test"))
    result = cli(app, "engine_reconcile", "--as", "vic")
    assert result.exit_code == 1 and "needs the operate permission" in result.output
