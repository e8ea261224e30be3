"""`rebound approvals …`: the same decisions as the pages and the API, four eyes included."""

import json

import pytest

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Approval, AuditEntry, Run, User
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.people import users
from console.services.recovery import approvals, params_fix
from tests.factories import Runs, make_tenant

LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}
BROKEN = {"fail_times": 9, "error": "fatal", "code": "bad_account", "message": "account 42 is closed"}
FIXED = {**BROKEN, "fail_times": 0}


@pytest.fixture
def request_of(app, clock):
    """File a params fix of a fresh dead letter as the named person."""
    runs = Runs()

    def file(username: str) -> Approval:
        run_id = runs.submit("demo.flaky", BROKEN, policy=LENIENT)
        assert execute(run_id, 0, clock=clock) == "dead"
        user = db.session.execute(db.select(User).where(User.username == username)).scalar_one()
        return params_fix.request_fix(runs.dead_letters(run_id)[0].id, FIXED, "the account was reopened",
                                      Actor(username, user.id))

    return file


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()

    def invoke(*args: str):
        result = runner.invoke(args=["approvals", *args])
        db.session.expire_all()
        return result

    return invoke


@pytest.fixture
def people(app):
    for name, role in (("olga", "operator"), ("alex", "approver"), ("ada", "approver")):
        users.create(name, role, "correct-horse-battery", Actor("test"))


def test_self_approval_is_refused_on_the_cli_too(cli, people, request_of):
    request = request_of("alex")
    result = cli("approve", str(request.id), "--as", "alex")
    assert result.exit_code == 1
    assert "refused (four_eyes, 403): you requested this change" in result.output
    assert db.session.get(Approval, request.id).status == "pending"
    refusal = db.session.execute(db.select(AuditEntry).order_by(AuditEntry.seq.desc())).scalars().first()
    assert (refusal.action, refusal.actor) == ("approval.approve.refused", "alex (cli)")


def test_list_show_approve_and_roll_back_from_the_cli(cli, people, request_of):
    request = request_of("olga")
    listed = cli("list")
    assert listed.exit_code == 0 and f"{request.id}" in listed.output and "olga" in listed.output
    shown = cli("show", str(request.id))
    assert shown.exit_code == 0
    assert "Edit a dead letter's params, then replay it" in shown.output
    assert "reason: the account was reopened" in shown.output and "params.fail_times: 9 -> 0" in shown.output

    assert cli("approve", str(request.id), "--as", "olga").exit_code == 1  # an operator: no approve permission
    assert cli("approve", str(request.id), "--as", "nobody").exit_code == 1
    done = cli("approve", str(request.id), "--as", "ada", "--note", "checked with billing")
    assert done.exit_code == 0 and f"request #{request.id} is executed" in done.output
    db.session.expire_all()
    # What it did, as the page says it (not "executed" alone, which read as done where work was only queued).
    assert done.output.strip() == f"request #{request.id} is executed: {db.session.get(Approval, request.id).outcome}"
    assert db.session.get(Run, request.payload["run_id"]).params == FIXED
    assert cli("list", "--status", "executed").output.count("dead_letter.fix_params") == 1
    # How the run it acted on stands now, beside what was said when it ran (the API's `run`).
    shown = cli("show", str(request.id)).output
    assert f"  run now: #{request.payload['run_id']} pending (series 2)" in shown
    assert "  outcome when it ran: run #" in shown  # not read as how it stands now (helper 128)
    # As the API answers, for a script (helper 109).
    answered = json.loads(cli("list", "--status", "executed", "--json").output)
    assert answered["next_before"] is None  # {items, next_before}, as GET /api/approvals (it printed a bare list)
    [listed] = answered["items"]
    assert (listed["id"], listed["run"]["series"]) == (request.id, 2)
    assert json.loads(cli("show", str(request.id), "--json").output) == listed

    again = cli("approve", str(request.id), "--as", "alex")
    assert again.exit_code == 1 and "refused (conflict, 409)" in again.output
    rolled = cli("rollback", str(request.id), "--as", "alex")
    assert rolled.exit_code == 0
    # What was undone, not read as what the rollback did (helper 139).
    assert rolled.output.strip() == (f"request #{request.id} is rolled back (it had: "
                                     f"{db.session.get(Approval, request.id).outcome})")
    assert db.session.get(Run, request.payload["run_id"]).params == BROKEN
    assert "  rolled back by: alex" in cli("show", str(request.id)).output  # the page says who; the CLI did not
    # One that never ran says why it closed, not "when it ran" (helper 167).
    settled = request_of("olga")
    assert approvals.supersede(settled.id, "its dead letter was discarded first", utcnow())
    db.session.commit()
    shown = cli("show", str(settled.id)).output
    assert "  outcome: its dead letter was discarded first" in shown and "when it ran" not in shown
    assert "rolled back by" not in shown


def test_the_list_pages_as_the_api_does(cli, people, request_of):
    first, second = request_of("olga"), request_of("olga")
    newest = json.loads(cli("list", "--limit", "1", "--json").output)
    assert [item["id"] for item in newest["items"]] == [second.id] and newest["next_before"] == second.id
    assert f"older requests: --before {second.id}" in cli("list", "--limit", "1").output
    older = json.loads(cli("list", "--limit", "1", "--before", str(second.id), "--json").output)
    assert [item["id"] for item in older["items"]] == [first.id] and older["next_before"] is None


def test_a_secret_in_a_request_is_masked_on_the_cli_as_over_the_api(cli, people, app, clock):
    """`approvals show` printed the new api_key a params fix would set, which the API and the page mask."""
    runs = Runs()
    run_id = runs.submit("demo.flaky", {**BROKEN, "api_key": "sk_live_old1234"}, policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    olga = db.session.execute(db.select(User).where(User.username == "olga")).scalar_one()
    request = params_fix.request_fix(runs.dead_letters(run_id)[0].id, {**FIXED, "api_key": "sk_live_new5678"},
                                     "key rotated", Actor("olga", olga.id))
    for said in (cli("show", str(request.id)).output, cli("show", str(request.id), "--json").output,
                 cli("list", "--json").output):
        assert "sk_live" not in said, said
    assert json.loads(cli("show", str(request.id), "--json").output)["after"]["params"]["api_key"] == "*** (changed)"
    assert 'params.api_key: "***" -> "*** (changed)"' in cli("show", str(request.id)).output  # a row of the change


def test_reject_needs_a_note_on_the_cli(cli, people, request_of):
    request = request_of("olga")
    assert cli("reject", str(request.id), "--as", "ada").exit_code == 2  # click: --note is required
    assert cli("reject", str(request.id), "--as", "ada", "--note", " ").exit_code == 1
    done = cli("reject", str(request.id), "--as", "ada", "--note", "fix the account first")
    assert done.exit_code == 0 and "is rejected" in done.output
    assert cli("list", "--status", "bogus").exit_code == 1


def test_a_tenant_scoped_person_decides_only_their_tenants_requests_on_the_cli(cli, people, request_of):
    acme = make_tenant("acme")
    users.create("sam", "approver", "correct-horse-battery", Actor("test"), tenant=acme)
    request = request_of("olga")  # in the default tenant
    refused = cli("approve", str(request.id), "--as", "sam")
    assert refused.exit_code == 1 and "refused (not_found, 404)" in refused.output
    assert db.session.get(Approval, request.id).status == "pending"


def test_a_requester_withdraws_their_own_waiting_request_from_the_cli(cli, people, request_of):
    request = request_of("olga")
    refused = cli("withdraw", str(request.id), "--as", "ada")
    assert refused.exit_code == 1 and "refused (forbidden, 403): only the person who asked" in refused.output
    done = cli("withdraw", str(request.id), "--as", "olga", "--note", "filed against the wrong letter")
    assert done.exit_code == 0 and f"request #{request.id} is withdrawn" in done.output
    assert cli("list", "--status", "withdrawn").output.count("dead_letter.fix_params") == 1
    late = cli("approve", str(request.id), "--as", "ada")
    assert late.exit_code == 1 and "is withdrawn, no longer pending" in late.output


@pytest.mark.parametrize("command", [["show"], ["approve", "--as", "alex"], ["withdraw", "--as", "olga"]])
def test_an_id_no_row_can_have_is_a_usage_error_not_a_traceback(cli, people, command):
    result = cli(command[0], "9" * 20, *command[1:])
    assert result.exit_code == 2 and "is not an id: ids are whole numbers from 1 to 2147483647" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
