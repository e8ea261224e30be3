"""The Approvals pages: an approver's inbox, a requester's requests, the diff, the decision forms, the tenant wall."""

import json
import re
from datetime import timedelta
from html import unescape as html_unescape

import pytest
from sqlalchemy import select, update

from console.domain.clock import utcnow
from console.extensions import db
from console.models import Approval, AuditEntry, DeadLetter, Run
from console.services.actor import Actor
from console.services.engine import compensation, control
from console.services.engine.execute import execute
from console.services.errors import Conflict
from console.services.recovery import (
    approvals,
    bulk_discard,
    decisions,
    params_fix,
    run_compensation,
    runbook_runner,
    runbooks,
)
from console.services.system import console_settings
from tests.factories import Runs, make_tenant
from tests.helpers import Auth, assert_marked, csrf_from

LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}
BROKEN = {"fail_times": 9, "error": "fatal", "code": "bad_account", "message": "account 42 is closed"}
FIXED = {**BROKEN, "fail_times": 0}
HX = {"HX-Request": "true"}


@pytest.fixture
def runs(app):
    return Runs()


@pytest.fixture
def person(app):
    """Log a new person in on a browser (client) of their own; return (client, user)."""

    def make(username: str, role: str, tenant=None):
        client = app.test_client()
        auth = Auth(client)
        user = auth.make_user(username, role, tenant=tenant)
        assert auth.login(username).status_code == 302
        client.csrf = lambda path="/overview": csrf_from(client.get(path).get_data(as_text=True))
        return client, user

    return make


@pytest.fixture
def letter(runs, clock):
    def make(tenant: str = "default") -> DeadLetter:
        run_id = runs.submit("demo.flaky", BROKEN, policy=LENIENT, tenant=tenant)
        assert execute(run_id, 0, clock=clock) == "dead"
        return runs.dead_letters(run_id)[0]

    return make


def file_fix(letter: DeadLetter, requester, params=None) -> Approval:
    return params_fix.request_fix(letter.id, params or FIXED, "the account was reopened",
                                  Actor(requester.username, requester.id))


def approve(client, request: Approval) -> None:
    """Approve the request from its page, as the client's person."""
    token = client.csrf(f"/approvals/{request.id}")
    assert client.post(f"/approvals/{request.id}/approve", data={"csrf_token": token}).status_code == 303


def html(response) -> str:
    return response.get_data(as_text=True)


def nav_count(page: str) -> str | None:
    found = re.search(r'href="/approvals" class="[^"]*"(?: aria-current="page")?>'
                      r'Approvals<span id="nav-count-approvals-index">(?: <span class="nav-count"[^>]*>(\d+)</span>'
                      r'<span class="visually-hidden"> waiting for you: [^<]+</span>)?</span></a>', page)
    return found.group(1) if found else "no link"


def test_the_inbox_lists_what_an_approver_can_decide_with_a_count_in_the_nav(person, letter, clock):
    operator_client, olga = person("olga", "operator")
    approver_client, alex = person("alex", "approver")
    theirs = file_fix(letter(), olga)
    own = file_fix(letter(), alex)  # an approver's own request is not in their inbox
    page = html(approver_client.get("/approvals"))
    assert f'href="/approvals/{theirs.id}"' in page and f'href="/approvals/{own.id}"' not in page
    assert "Edit a dead letter&#39;s params, then replay it" in page and "olga" in page
    assert "the account was reopened" in page and re.search(r"2[34] h \d+ min left", page)
    assert f'dead letter #{theirs.subject_id} · run #{theirs.payload["run_id"]}' in page
    assert nav_count(page) == "1"
    # The operator sees the Approvals link (their own requests) but no count, and lands on My requests.
    assert nav_count(html(operator_client.get("/overview"))) is None
    landing = operator_client.get("/approvals")
    assert landing.status_code == 302 and landing.headers["Location"].endswith("/approvals/mine")
    mine = html(operator_client.get("/approvals/mine"))
    assert f'href="/approvals/{theirs.id}"' in mine and f'href="/approvals/{own.id}"' not in mine
    assert 'badge pending' in mine
    assert f'href="/approvals/{own.id}"' in html(operator_client.get("/approvals/all"))  # read-only, like the API


def test_a_requester_sees_the_answers_to_their_requests_counted_until_they_read_them(person, letter, app):
    operator_client, olga = person("olga", "operator")
    approver_client, alex = person("alex", "approver")
    approved, rejected, withdrawn, expiring = (file_fix(letter(), olga) for _ in range(4))
    approve(approver_client, approved)
    decisions.reject(rejected.id, Actor(alex.username, alex.id), "the account stays closed")
    decisions.withdraw(withdrawn.id, Actor(olga.username, olga.id))  # their own act is no news to them
    overview = html(operator_client.get("/overview"))
    assert nav_count(overview) == "2"  # before: nothing told them, only approvers had a count (helper 93)
    assert '<span class="visually-hidden"> waiting for you: 2 answers to read</span>' in overview
    everything = html(operator_client.get("/approvals/all"))
    assert ('<span id="tab-answered"> <span class="nav-count" title="2 answered since you last looked">2</span>'
            '<span class="visually-hidden"> answered since you last looked</span></span>') in everything
    mine = html(operator_client.get("/approvals/mine"))  # read: the counts go
    assert nav_count(mine) is None and '<span id="tab-answered"></span>' in mine
    assert nav_count(html(operator_client.get("/overview"))) is None
    # Closed by the system (expired) while they are away, it is news again; the list's own refresh says so beside it.
    db.session.execute(update(Approval).where(Approval.id == expiring.id).values(expires_at=utcnow()))
    db.session.commit()
    approvals.expire_due(utcnow)
    assert nav_count(html(operator_client.get("/overview"))) == "1"
    refreshed = html(operator_client.get("/approvals/all?", headers=HX))
    assert re.search(r'<span id="nav-count-approvals-index" hx-swap-oob="true"> <span class="nav-count"[^>]*>1</span>',
                     refreshed)
    # Their own replay of a letter their fix waited on closes the fix: no news to them (helper 98); another's is.
    assert nav_count(html(operator_client.get("/approvals/mine"))) is None
    own_letter = letter()
    file_fix(own_letter, olga)
    control.replay(db.session.get(DeadLetter, own_letter.id), Actor(olga.username, olga.id))
    assert nav_count(html(operator_client.get("/overview"))) is None
    others_letter = letter()
    file_fix(others_letter, olga)
    control.replay(db.session.get(DeadLetter, others_letter.id), Actor(alex.username, alex.id))
    assert nav_count(html(operator_client.get("/overview"))) == "1"
    # An approver who files requests too sees both in one count: one to decide, one answer to read.
    mine_to_decide = file_fix(letter(), olga)
    own = file_fix(letter(), alex)
    _, ann = person("ann", "approver")
    decisions.reject(own.id, Actor(ann.username, ann.id), "not now")
    both = html(approver_client.get("/overview"))
    assert nav_count(both) == "2" and mine_to_decide.status == "pending"
    assert 'title="2 waiting for you: 1 request to decide, 1 answer to read"' in both


def test_my_requests_marks_the_rows_answered_since_the_last_look_through_its_refreshes(person, letter):
    operator_client, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    approved, waiting = file_fix(letter(), olga), file_fix(letter(), olga)
    approve(approver_client, approved)

    def marked(page: str) -> set[int]:
        return {int(found) for found in re.findall(r'<tr class="answered-news">\s*<td class="mono"><a href="'
                                                   r'/approvals/(\d+)">', page)}

    # The count went on opening the list, and nothing said which row the answer was.
    mine = html(operator_client.get("/approvals/mine"))
    assert marked(mine) == {approved.id} and ">new<" in mine
    refresh = html_unescape(re.search(r'<div id="results" hx-get="([^"]+)"', mine).group(1))
    assert marked(html(operator_client.get(refresh, headers=HX))) == {approved.id}  # still there 10 s on
    assert marked(html(operator_client.get("/approvals/mine"))) == set()  # the next look starts afresh
    # Time running out is news when the lists say "expired", not when the expiry job marks it up to a minute later.
    db.session.execute(update(Approval).where(Approval.id == waiting.id).values(expires_at=utcnow()))
    db.session.commit()
    assert nav_count(html(operator_client.get("/overview"))) == "1"
    assert marked(html(operator_client.get("/approvals/mine"))) == {waiting.id}
    approvals.expire_due(utcnow)  # and once read, the job's mark is no news again
    assert nav_count(html(operator_client.get("/overview"))) is None
    bad = html(operator_client.get("/approvals/mine?since=not-a-time", headers=HX))
    assert marked(bad) == set()


@pytest.mark.parametrize("path", ["/overview", "/runs/", "/runs/workflows", "/workorders/", "/queues/", "/breakers/"])
def test_a_live_page_refreshes_the_nav_count_beside_approvals(person, letter, path):
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    assert "hx-swap-oob" not in html(approver_client.get(path))  # the whole page has its counts in place
    file_fix(letter(), olga)  # filed while the approver sits on the page: its 5 s refresh did not show the count
    refreshed = html(approver_client.get(path, headers=HX))
    assert re.search(r'<span id="nav-count-approvals-index" hx-swap-oob="true"> <span class="nav-count"[^>]*>1</span>',
                     refreshed), refreshed[:500]


def test_a_status_no_request_can_have_is_said_not_dropped(person, letter):
    client, olga = person("olga", "operator")
    file_fix(letter(), olga)
    refused = client.get("/approvals/all?status=%F0%9F%92%A5")
    # It listed every request as if no status had been asked for (helper 101); the API's is a 422 too.
    assert refused.status_code == 422
    assert "Fix the filter: status is one of pending, executed" in html(refused) and "not &#39;💥&#39;" in html(refused)


def test_all_requests_filter_by_the_kind_of_change(person, letter):
    """A manager looking for last week's compensations read every params fix and discard to find them (helper 149)."""
    client, olga = person("olga", "operator")
    request = file_fix(letter(), olga)
    fixes = html(client.get("/approvals/all?kind=dead_letter.fix_params&status=pending"))
    assert f'href="/approvals/{request.id}"' in fixes
    assert "Every “Edit a dead letter&#39;s params, then replay it” request that is pending, newest first." in fixes
    assert '<option value="dead_letter.fix_params" selected>' in fixes
    compensations = html(client.get("/approvals/all?kind=run.compensate"))
    assert f'href="/approvals/{request.id}"' not in compensations and "No requests." in compensations
    # "all", as the API and the CLI say every status, keeping the kind (it was a 422 that dropped it; helper 157).
    every = html(client.get("/approvals/all?kind=dead_letter.fix_params&status=all"))
    assert '<option value="dead_letter.fix_params" selected>' in every and "Fix the filter" not in every
    refused = client.get("/approvals/all?kind=everything")
    assert refused.status_code == 422
    assert "Fix the filter: kind is one of dead_letter.fix_params, dlq.discard_bulk" in html(refused)
    assert f'href="/approvals/{request.id}"' in html(refused)  # every kind is shown


def test_the_cli_filters_requests_by_kind(person, letter, app):
    _, olga = person("olga", "operator")
    request = file_fix(letter(), olga)
    runner = app.test_cli_runner()
    listed = runner.invoke(args=["approvals", "list", "--kind", "dead_letter.fix_params", "--json"])
    assert [item["id"] for item in json.loads(listed.output)["items"]] == [request.id]
    none = runner.invoke(args=["approvals", "list", "--kind", "run.compensate", "--json"])
    assert json.loads(none.output)["items"] == []
    bad = runner.invoke(args=["approvals", "list", "--kind", "nope"])
    assert bad.exit_code != 0 and "kind is one of dead_letter.fix_params" in bad.output


def test_the_inbox_refreshes_itself_and_the_counts_beside_it(person, letter):
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    page = html(approver_client.get("/approvals"))
    assert '<div id="results" hx-get="/approvals?" hx-trigger="every 10s" hx-swap="outerHTML">' in page
    assert "hx-swap-oob" not in page  # the whole page has its counts in place
    first = file_fix(letter(), olga)  # filed while the approver sits on the page
    refreshed = html(approver_client.get("/approvals?", headers=HX))
    assert refreshed.lstrip().startswith('<div id="results"') and f'href="/approvals/{first.id}"' in refreshed
    assert '<span id="tab-waiting" hx-swap-oob="true"> <span class="nav-count">1</span></span>' in refreshed
    assert re.search(r'<span id="nav-count-approvals-index" hx-swap-oob="true"> <span class="nav-count"[^>]*>1</span>',
                     refreshed)
    # Paged on, the list stays where the person put it.
    assert "hx-trigger" not in html(approver_client.get(f"/approvals?before={first.id + 1}"))


def test_an_expired_request_leaves_the_inbox_and_reads_expired(person, letter, app):
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    request = file_fix(letter(), olga)
    db.session.execute(db.update(Approval).where(Approval.id == request.id).values(
        expires_at=request.created_at))  # its time ran out; the expiry job has not marked it yet
    db.session.commit()
    assert f'href="/approvals/{request.id}"' not in html(approver_client.get("/approvals"))
    page = html(approver_client.get(f"/approvals/{request.id}"))
    assert "badge expired" in page and "Approve and run" not in page


def test_viewers_and_managers_read_every_request_but_have_no_inbox(person, letter):
    _, olga = person("olga", "operator")
    request = file_fix(letter(), olga)
    for name, role in (("vic", "viewer"), ("meg", "manager")):
        client, _ = person(name, role)
        assert nav_count(html(client.get("/overview"))) is None  # the link, with nothing counted for them
        landing = client.get("/approvals")
        assert landing.status_code == 302 and landing.headers["Location"].endswith("/approvals/all")
        listed = html(client.get("/approvals/all"))
        assert f'href="/approvals/{request.id}"' in listed
        assert "Waiting for me" not in listed and "My requests" not in listed
        assert client.get("/approvals/mine").status_code == 403
        page = html(client.get(f"/approvals/{request.id}"))
        assert "the account was reopened" in page and "Approve and run" not in page


def test_the_request_page_shows_the_diff_the_reason_and_both_names(person, letter, clock):
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    request = file_fix(letter(), olga, {**BROKEN, "fail_times": 0, "account": {"id": 42, "region": "eu"}})
    page = html(approver_client.get(f"/approvals/{request.id}"))
    assert "the account was reopened" in page and "<strong>olga</strong>" in page
    rows = re.findall(r'<tr class="(added|changed|removed)">\s*<td class="mono">([^<]+)</td>', page)
    assert rows == [("added", "params.account"), ("changed", "params.fail_times")]  # a new object: one row
    assert '<pre class="json was">9</pre>' in page and '<pre class="json now">0</pre>' in page
    assert "Approve and run" in page and "Reject" in page


def test_characters_that_would_hide_what_a_change_says_are_written_out(person, letter):
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    override = "\u202e"  # right-to-left override: "0001" after it reads "1000"
    request = params_fix.request_fix(letter().id, {**FIXED, "account": f"{override}0001"},
                                     f"set account to 1000 {override}gnorw", Actor(olga.username, olga.id))
    page = html(approver_client.get(f"/approvals/{request.id}"))
    assert override not in page
    assert '<pre class="json now">&#34;\\u202e0001&#34;</pre>' in page  # the diff's After cell, as JSON reads it
    assert '"account": "\\u202e0001"' in page.replace("&#34;", '"')  # the whole values
    assert "set account to 1000 \\u202egnorw" in page  # the reason
    assert db.session.get(Approval, request.id).after["params"]["account"] == f"{override}0001"  # stored as sent


def test_a_fix_request_shows_the_failure_it_fixes_its_dead_letter_as_it_stands_now(person, letter, runs):
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    found = letter()
    request = file_fix(found, olga)
    page = html(approver_client.get(f"/approvals/{request.id}"))
    table = re.search(r'<table class="approval-letters">.*?</table>', page, re.S).group(0)
    assert "The dead letter <span class=\"subtle\">· as it stands now</span>" in page
    assert f"#{found.id}</td>" in table and f'<a href="/runs/{found.run_id}">run {found.run_id}</a>' in table
    assert '<span class="error-code">bad_<wbr>account</span>' in table
    assert "account 42 is closed" in table and "<code>python:demo.flaky</code>" in table and ">open<" in table
    # Replayed meanwhile (the fix then closes): the approver reads that it no longer is open.
    control.replay(found, Actor("bob"))
    assert ">replayed<" in re.search(r'<table class="approval-letters">.*?</table>',
                                     html(approver_client.get(f"/approvals/{request.id}")), re.S).group(0)


def test_the_requester_is_not_offered_the_buttons_and_is_refused_when_posting(person, letter, runs):
    operator_client, olga = person("olga", "operator")
    request = file_fix(letter(), olga)
    page = html(operator_client.get(f"/approvals/{request.id}"))
    assert "Approve and run" not in page and "another person with the approve permission decides" in page
    token = operator_client.csrf(f"/approvals/{request.id}")
    refused = operator_client.post(f"/approvals/{request.id}/approve", data={"csrf_token": token})
    assert refused.status_code == 403  # an operator has no approve permission at all

    # An approver who asked is refused by the server's four-eyes rule, with its message, and it is audited.
    approver_client, ada = person("ada", "approver")
    own = file_fix(letter(), ada)
    assert "Approve and run" not in html(approver_client.get(f"/approvals/{own.id}"))
    token = approver_client.csrf(f"/approvals/{own.id}")
    refused = approver_client.post(f"/approvals/{own.id}/approve", data={"csrf_token": token}, headers=HX)
    assert refused.status_code == 403
    assert "you requested this change; another person with the approve permission must approve it" in html(refused)
    assert db.session.get(Approval, own.id).status == "pending"
    actions = db.session.execute(select(AuditEntry.action).order_by(AuditEntry.seq)).scalars().all()
    assert actions[-1] == "approval.approve.refused"


def test_an_approver_approves_from_the_page_and_the_run_is_replayed(person, letter, runs):
    olga_client, olga = person("olga", "operator")
    approver_client, alex = person("alex", "approver")
    request = file_fix(letter(), olga)
    token = approver_client.csrf(f"/approvals/{request.id}")
    done = approver_client.post(f"/approvals/{request.id}/approve",
                                data={"csrf_token": token, "approve-note": "checked with billing"})
    assert done.status_code == 303 and done.headers["Location"] == f"/approvals/{request.id}"
    page = html(approver_client.get(f"/approvals/{request.id}"))
    assert "Approved request #" in page and "badge executed" in page and "checked with billing" in page
    assert "<strong>alex</strong>" in page and "<strong>olga</strong>" in page
    run = runs.get(request.payload["run_id"])
    assert (run.status, run.series, run.params) == ("pending", 2, FIXED)
    assert nav_count(page) is None  # nothing waits any more

    # It can be rolled back from the same page; the run's params are as before.
    token = csrf_from(page)
    rolled = approver_client.post(f"/approvals/{request.id}/rollback",
                                  data={"csrf_token": token, "rollback-note": "billing reopened the wrong account"})
    assert rolled.status_code == 303
    page = html(approver_client.get(f"/approvals/{request.id}"))
    assert "badge rolled_back" in page
    rolled_back = re.search(r"<dt>Rolled back</dt><dd>(.*?)</dd>", page, re.S).group(1)
    assert "<strong>alex</strong>" in rolled_back and "billing reopened the wrong account" in rolled_back
    # Its replay goes ahead with the params as they were: the outcome said "with the fixed params" (helper 101).
    outcome = re.search(r"<dt>Outcome</dt><dd>(.*?)</dd>", page, re.S).group(1)
    assert "with the params as they were (rolled back)" in outcome and "fixed params" not in outcome
    assert runs.get(run.id).params == BROKEN


def test_the_lists_say_who_rolled_a_request_back_beside_who_approved_it(person, letter):
    olga_client, olga = person("olga", "operator")
    alex_client, _ = person("alex", "approver")
    bea_client, _ = person("bea", "approver")
    request = file_fix(letter(), olga)
    approve(alex_client, request)
    token = bea_client.csrf(f"/approvals/{request.id}")
    rolled = bea_client.post(f"/approvals/{request.id}/rollback",
                             data={"csrf_token": token, "rollback-note": "QA says two were real orders"})
    assert rolled.status_code == 303
    # "Decided by" read alex alone: the list did not say someone else had undone it; nor why, on the requester's
    # My requests (helper 116).
    for page in (bea_client.get("/approvals/all"), olga_client.get("/approvals/mine")):
        row = html(page).split(f">#{request.id}</a>")[1].split("</tr>")[0]
        decided = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row.split("badge rolled_back")[1])).strip()
        assert decided.endswith("alex rolled back by bea “QA says two were real orders”"), decided


def test_the_requester_cannot_roll_their_own_change_back(person, letter):
    """Undoing a change is a change too: like deciding it, it is another person's (README: never their own)."""
    requester_client, arno = person("arno", "approver")
    approver_client, _ = person("alex", "approver")
    request = file_fix(letter(), arno)
    approve(approver_client, request)
    page = html(requester_client.get(f"/approvals/{request.id}"))
    assert "/rollback" not in page
    assert "another person with the approve permission rolls it back" in page
    refused = requester_client.post(f"/approvals/{request.id}/rollback", data={"csrf_token": csrf_from(page)},
                                    follow_redirects=True)
    assert refused.status_code == 403
    assert "you requested this change; another person with the approve permission must roll it back" in html(refused)
    db.session.expire_all()
    assert db.session.get(Approval, request.id).status == "executed"
    assert db.session.execute(select(AuditEntry.action).where(AuditEntry.actor == "arno")
                              .order_by(AuditEntry.seq.desc()).limit(1)).scalar() == "approval.rollback.refused"
    assert f'action="/approvals/{request.id}/rollback"' in html(approver_client.get(f"/approvals/{request.id}"))


def test_a_fix_whose_run_ran_again_says_why_it_stays_instead_of_offering_a_rollback(person, letter, runs, clock):
    """A params fix replays at once, so its run usually runs again before anyone thinks of rolling back."""
    olga_client, olga = person("olga", "operator")
    approver_client, alex = person("alex", "approver")
    request = file_fix(letter(), olga)
    approve(approver_client, request)
    assert f'action="/approvals/{request.id}/rollback"' in html(approver_client.get(f"/approvals/{request.id}"))
    run = runs.get(request.payload["run_id"])
    assert execute(run.id, run.attempt, clock=clock) == "succeeded"
    page = html(approver_client.get(f"/approvals/{request.id}"))
    assert "/rollback" not in page
    kept = re.search(r'<div class="panel rollback">(.*?)</div>', page, re.S).group(1)
    assert f"run {run.id} ran again since the fix (it is succeeded, series 2, attempt 1)" in kept
    assert "cannot be rolled back" in kept
    # The requester reads the same, not that another person may roll it back.
    theirs = html(olga_client.get(f"/approvals/{request.id}"))
    assert f"cannot be rolled back now: run {run.id} ran again since the fix" in theirs
    assert "rolls it back" not in theirs


def test_reject_needs_a_note_and_then_never_runs(person, letter, runs):
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    request = file_fix(letter(), olga)
    here = f"/approvals/{request.id}"
    token = approver_client.csrf(here)
    # The page's form posts with htmx: the refusal replaces the request's detail in place, the address stays the
    # request's own (a reload posts nothing), and what was typed is kept beside the message.
    form = re.search(r'<form [^>]*action="/approvals/\d+/reject"[^>]*>', html(approver_client.get(here))).group(0)
    assert f'hx-post="{here}/reject"' in form and 'hx-target="#approval-detail"' in form
    missing = approver_client.post(f"{here}/reject", data={"csrf_token": token, "reject-note": " "}, headers=HX)
    assert missing.status_code == 422 and "say why in a note" in html(missing) and "<html" not in html(missing)
    assert_marked(html(missing), "textarea", "reject-note", "say why in a note")
    too_long = approver_client.post(f"{here}/reject", data={"csrf_token": token, "reject-note": "why " * 600},
                                    headers=HX)
    assert too_long.status_code == 422 and "keep the note to at most 2,000 characters" in html(too_long)
    assert re.search(r'<textarea[^>]*name="reject-note"[^>]*>\s*why why why', html(too_long))
    # Without htmx the refusal is a redirect to the request's page, which says it with the refusal's status.
    plain = approver_client.post(f"{here}/reject", data={"csrf_token": token, "reject-note": ""})
    assert plain.status_code == 303 and plain.headers["Location"] == here
    landed = approver_client.get(here)
    assert landed.status_code == 422
    assert '<div class="flash error" role="status">say why in a note: the requester reads it</div>' in html(landed)
    assert db.session.get(Approval, request.id).status == "pending"
    done = approver_client.post(f"{here}/reject", data={"csrf_token": token, "reject-note": "fix the account first"},
                                headers=HX)
    assert done.status_code == 204 and done.headers["HX-Redirect"] == here
    assert "Rejected request #" in html(approver_client.get(here))
    db.session.expire_all()
    assert db.session.get(Approval, request.id).status == "rejected"
    assert runs.get(request.payload["run_id"]).status == "dead"


def test_a_refused_decision_without_javascript_lands_on_the_requests_page_with_its_4xx(person, letter, runs):
    _, olga = person("olga", "operator")
    approver_client, ada = person("ada", "approver")
    own, theirs = file_fix(letter(), ada), file_fix(letter(), olga)
    # Approving one's own request (403), then a request decided already (409): each ends on the request's own page,
    # which says why with the refusal's status; reloading it posts nothing and reads as the request is.
    for request, action, status, says in (
            (own, "approve", 403, "you requested this change; another person with the approve permission"),
            (theirs, "reject", 409, f"request {theirs.id} is executed, no longer pending")):
        here = f"/approvals/{request.id}"
        if request is theirs:
            other_client, _ = person("alex", "approver")
            assert other_client.post(f"{here}/approve", data={"csrf_token": other_client.csrf(here)}
                                     ).status_code == 303
        refused = approver_client.post(f"{here}/{action}", data={"csrf_token": approver_client.csrf(here),
                                                                 f"{action}-note": "not this one"})
        assert refused.status_code == 303 and refused.headers["Location"] == here
        landed = approver_client.get(here)
        assert landed.status_code == status and says in html(landed), html(landed)
        reloaded = approver_client.get(here)
        assert reloaded.status_code == 200 and says not in html(reloaded)
    db.session.expire_all()
    assert (db.session.get(Approval, own.id).status, db.session.get(Approval, theirs.id).status) == (
        "pending", "executed")


def test_a_refused_action_in_place_clears_the_pages_older_messages_and_refreshes_the_nav_count(person, letter):
    """A withdraw refused on a tab left open showed "Filed request #12 …" above "request 12 is executed", and the nav
    still counted a request decided meanwhile (helper 149)."""
    operator_client, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    request, waiting = file_fix(letter(), olga), file_fix(letter(), olga)
    here = f"/approvals/{request.id}"
    assert approver_client.post(f"{here}/approve", data={"csrf_token": approver_client.csrf(here)}).status_code == 303
    refused = operator_client.post(f"{here}/withdraw", headers=HX, data={"csrf_token": operator_client.csrf(here)})
    body = html(refused)
    assert refused.status_code == 409 and f"request {request.id} is executed, no longer pending" in body
    assert '<div id="flashes" hx-swap-oob="true"></div>' in body
    there = f"/approvals/{waiting.id}"
    refused = approver_client.post(f"{there}/approve", headers=HX, data={"csrf_token": approver_client.csrf(there),
                                                                         "approve-note": "x" * 5000})
    assert refused.status_code == 422
    assert re.search(r'<span id="nav-count-approvals-index" hx-swap-oob="true"> <span class="nav-count"[^>]*>1<',
                     html(refused))


def test_decisions_need_the_csrf_token(person, letter):
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    request = file_fix(letter(), olga)
    for action in ("approve", "reject", "rollback"):
        response = approver_client.post(f"/approvals/{request.id}/{action}", data={"reject-note": "no"})
        assert response.status_code == 400 and "CSRF" in html(response)
    assert db.session.get(Approval, request.id).status == "pending"


def test_a_tenant_scoped_approver_sees_and_decides_only_their_tenants_requests(person, letter):
    acme = make_tenant("acme")
    _, olga = person("olga", "operator")
    scoped_client, _ = person("sam", "approver", tenant=acme)
    elsewhere = file_fix(letter(), olga)
    own_tenant = file_fix(letter("acme"), olga)
    inbox = html(scoped_client.get("/approvals"))
    assert f'href="/approvals/{own_tenant.id}"' in inbox and f'href="/approvals/{elsewhere.id}"' not in inbox
    assert nav_count(inbox) == "1"
    assert scoped_client.get(f"/approvals/{elsewhere.id}").status_code == 404
    token = scoped_client.csrf("/approvals")
    assert scoped_client.post(f"/approvals/{elsewhere.id}/approve", data={"csrf_token": token}).status_code == 404
    assert db.session.get(Approval, elsewhere.id).status == "pending"


def test_the_dlq_fix_form_is_prefilled_validated_and_files_a_request(person, letter):
    client, olga = person("olga", "operator")
    found = letter()
    assert f'href="/dlq/{found.id}/fix"' in html(client.get("/dlq/?view=list"))
    form = html(client.get(f"/dlq/{found.id}/fix"))
    prefilled = re.search(r'<textarea[^>]*name="params"[^>]*>\s*(.*?)</textarea>', form, re.S).group(1)
    assert json.loads(prefilled.replace("&#34;", '"').replace("&quot;", '"')) == BROKEN
    token = csrf_from(form)

    def post(**data):
        return client.post(f"/dlq/{found.id}/fix", data={"csrf_token": token, **data})

    broken_json = post(params='{"fail_times": 0,}', reason="reopened")
    assert broken_json.status_code == 422 and "not valid JSON" in html(broken_json)
    assert_marked(html(broken_json), "textarea", "params", "not valid JSON")
    assert 'aria-describedby="params-error params-help"' in html(broken_json)  # its help text still read
    # JSON the API refuses is refused here too, never stored to break the pages that show it.
    surrogate = post(params='{"x": "\\ud800"}', reason="reopened")
    assert surrogate.status_code == 422 and "is not valid Unicode (a lone surrogate" in html(surrogate)
    for number in ("NaN", "-Infinity", "1e999999"):
        infinite = post(params=f'{{"fail_times": {number}}}', reason="reopened")
        assert infinite.status_code == 422 and "the number at $.fail_times is not finite" in html(infinite)
    deep = post(params="[" * 5_000 + "]" * 5_000, reason="reopened")
    assert deep.status_code == 422 and "nested deeper than 64 levels" in html(deep)
    not_object = post(params="[1, 2]", reason="reopened")
    assert not_object.status_code == 422 and "must be a JSON object" in html(not_object)
    same = post(params=json.dumps(BROKEN), reason="reopened")
    assert same.status_code == 422 and "change at least one" in html(same)
    no_reason = post(params=json.dumps(FIXED), reason="")
    assert no_reason.status_code == 422 and "give a reason" in html(no_reason)
    assert db.session.execute(select(Approval)).first() is None
    assert client.post(f"/dlq/{found.id}/fix", data={"params": json.dumps(FIXED), "reason": "x"}).status_code == 400

    filed = post(params=json.dumps(FIXED), reason="the customer reopened the account")
    request = db.session.execute(select(Approval)).scalar_one()
    assert filed.status_code == 303 and filed.headers["Location"] == f"/approvals/{request.id}"
    assert (request.requested_by_id, request.after) == (olga.id, {"params": FIXED})
    assert db.session.get(Run, found.run_id).params == BROKEN  # nothing changes until approved
    # One fix of a letter waits at a time: the form says which, and a second is refused with it.
    assert f'A fix of this dead letter is already waiting for approval:\n  <a href="/approvals/{request.id}">' in html(
        client.get(f"/dlq/{found.id}/fix"))
    again = post(params=json.dumps({**FIXED, "account": 43}), reason="and another")
    assert again.status_code == 409 and f"request #{request.id} to fix dead letter {found.id} is already" in html(again)
    # Past its expiry it waits for nothing: the form does not send people to it (filing again gives way, below).
    request.expires_at = utcnow() - timedelta(seconds=1)
    db.session.commit()
    assert "already waiting for approval" not in html(client.get(f"/dlq/{found.id}/fix"))
    request.expires_at = utcnow() + timedelta(hours=1)
    db.session.commit()


def test_the_fix_forms_cancel_goes_back_to_the_dlq_list_as_it_was_filtered(person, letter):
    client, _ = person("olga", "operator")
    found = letter()
    filtered = "/dlq/?view=list&code=upstream_502&age=1d"

    def cancel(page: str) -> str:
        return re.search(r'<a class="button secondary" href="([^"]+)">Cancel</a>', page).group(1).replace("&amp;", "&")

    # Cancel went to the unfiltered list: the person lost the filter they had narrowed the letters down with.
    form = html(client.get(f"/dlq/{found.id}/fix", headers={"Referer": f"http://localhost{filtered}"}))
    assert cancel(form) == filtered
    refused = client.post(f"/dlq/{found.id}/fix", data={"csrf_token": csrf_from(form), "params": "{", "reason": "x",
                                                        "back": filtered})
    assert refused.status_code == 422 and cancel(html(refused)) == filtered  # kept through a refused send
    for elsewhere in ("https://evil.example/dlq/?view=list", "http://localhost/runs/?status=dead", ""):
        assert cancel(html(client.get(f"/dlq/{found.id}/fix", headers={"Referer": elsewhere}))) == "/dlq/?view=list"


def test_viewers_cannot_open_or_post_the_fix_form(person, letter):
    client, _ = person("vic", "viewer")
    found = letter()
    assert f'href="/dlq/{found.id}/fix"' not in html(client.get("/dlq/?view=list"))
    assert client.get(f"/dlq/{found.id}/fix").status_code == 403
    token = client.csrf("/overview")
    assert client.post(f"/dlq/{found.id}/fix", data={"csrf_token": token, "params": "{}", "reason": "x"}
                       ).status_code == 403


def test_a_bulk_discard_over_the_limit_becomes_a_request(person, letter, clock):
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 2, Actor("root"))
    client, _ = person("olga", "operator")
    found = [letter() for _ in range(3)]
    token = client.csrf("/dlq/")
    response = client.post("/dlq/bulk/discard", headers={"HX-Request": "true"}, data={
        "csrf_token": token, "id": [x.id for x in found], "reason": "load-test leftovers", "view": "list"})
    request = db.session.execute(select(Approval)).scalar_one()
    assert response.status_code == 200 and request.kind == "dlq.discard_bulk"
    assert f'<a href="/approvals/{request.id}">request #{request.id}</a>' in html(response)
    assert "Discarding 3 dead letters is more than the 2 one person may discard in an hour without approval" in html(
        response)
    db.session.expire_all()
    assert {db.session.get(DeadLetter, x.id).status for x in found} == {"open"}
    # The approver reads which letters: each one's handler, tenant, error, run and status now, not only its id.
    page = html(client.get(f"/approvals/{request.id}"))
    assert "The dead letters <span class=\"subtle\">· 3, as they stand now</span>" in page
    for each in found:
        assert f'<a href="/runs/{each.run_id}">run {each.run_id}</a>' in page and f"#{each.id}</td>" in page
    code = f'<span class="error-code">{found[0].error_code}</span>'
    assert page.replace("<wbr>", "").count(code) >= 3 and "<code>python:demo.flaky</code>" in page
    # Approving asks first, as a rollback does: the letters leave the DLQ unreplayed (helper 101).
    approver_client, _ = person("alex", "approver")
    assert 'hx-confirm="Approve and discard 3 dead letters? They leave the DLQ unreplayed' in html(
        approver_client.get(f"/approvals/{request.id}"))
    # Asked again, the letters wait in that request already: a second could only fail once the first is approved.
    plain = client.post("/dlq/bulk/discard", data={"csrf_token": token, "id": [x.id for x in found],
                                                   "reason": "load-test leftovers"}, follow_redirects=True)
    assert f"they wait already in discard request #{request.id}" in html(plain)
    assert db.session.execute(select(Approval).order_by(Approval.id.desc())).scalars().first().id == request.id
    small = client.post("/dlq/bulk/discard", data={"csrf_token": token, "id": [found[0].id, found[1].id],
                                                   "reason": "load-test leftovers"})
    assert small.status_code == 303
    db.session.expire_all()
    assert [db.session.get(DeadLetter, x.id).status for x in found] == ["discarded", "discarded", "open"]


def test_the_discard_button_knows_what_the_person_may_still_discard_this_hour(person, letter, clock):
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 2, Actor("root"))
    client, _ = person("olga", "operator")
    found = [letter() for _ in range(3)]
    assert 'data-request-above="2"' in client.get("/dlq/?view=list").get_data(as_text=True)
    token = client.csrf("/dlq/")
    client.post("/dlq/bulk/discard", data={"csrf_token": token, "id": [found[0].id], "reason": "junk", "view": "list"})
    page = client.get("/dlq/?view=list").get_data(as_text=True)
    assert 'data-request-above="1"' in page and "(1 left for you now)" in page
    response = client.post("/dlq/bulk/discard", headers={"HX-Request": "true"}, data={
        "csrf_token": token, "id": [found[1].id], "reason": "junk", "view": "list"})
    assert "Discarded 1 dead letter" in html(response) and 'data-request-above="0"' in html(response)


def test_admins_set_the_bulk_discard_limit_on_the_settings_page(person, app):
    admin_client, _ = person("root", "admin")
    page = html(admin_client.get("/admin/settings"))
    assert "Dead letters one person may discard in an hour without approval" in page and 'value="10"' in page
    token = csrf_from(page)
    path = f"/admin/settings/{console_settings.DISCARD_WITHOUT_APPROVAL}"
    bad = admin_client.post(path, data={"csrf_token": token, "value": "900"})
    assert bad.status_code == 422 and "from 0 to 500" in html(bad)
    arabic = admin_client.post(path, data={"csrf_token": token, "value": "٣"})  # int() reads it as 3
    assert arabic.status_code == 422 and "enter a whole number" in html(arabic)
    saved = admin_client.post(path, data={"csrf_token": token, "value": "25"})
    assert saved.status_code == 303 and console_settings.value(console_settings.DISCARD_WITHOUT_APPROVAL) == 25
    assert "by root" in html(admin_client.get("/admin/settings"))
    operator_client, _ = person("olga", "operator")
    assert operator_client.get("/admin/settings").status_code == 403
    assert operator_client.post(path, data={"csrf_token": operator_client.csrf(), "value": "1"}).status_code == 403
    assert console_settings.value(console_settings.DISCARD_WITHOUT_APPROVAL) == 25
    # The limit holds for every tenant: an admin limited to one may not raise it for all.
    tenant_admin, _ = person("tadmin", "admin", tenant=make_tenant("team-a"))
    refused = tenant_admin.post(path, data={"csrf_token": tenant_admin.csrf(), "value": "500"})
    assert refused.status_code == 403 and "shared by every tenant" in html(refused)
    assert console_settings.value(console_settings.DISCARD_WITHOUT_APPROVAL) == 25


def test_admin_people_says_what_approvers_do(person):
    client, _ = person("root", "admin")
    page = html(client.get("/admin/users"))
    assert "approves or rejects other people's data-fix requests" in page
    assert "Nobody decides" in page



def test_an_approved_runbook_request_says_it_is_queued_and_shows_its_execution_not_a_done_change(person, letter):
    # Approving a runbook queues its execution for a worker: the request must not read "ran" before it has.
    _, olga = person("olga", "operator")
    approver_client, alex = person("alex", "approver")
    dead = letter()
    execution = runbooks.start("resolve_runs", {"runs": str(dead.run_id), "note": "paid"}, Actor("olga", olga.id),
                               scope=None, reason="refunded by finance", enqueue=False)
    runbook_runner.preview(execution.id)
    # The list says what the request touches (it read "runbook resolve_runs · execution #3").
    listed = html(approver_client.get("/approvals"))
    assert f"runbook resolve_runs on run #{dead.run_id} · execution #{execution.id}" in listed
    token = approver_client.csrf(f"/approvals/{execution.approval_id}")
    done = approver_client.post(f"/approvals/{execution.approval_id}/approve", data={"csrf_token": token})
    assert done.status_code == 303
    page = html(approver_client.get(f"/approvals/{execution.approval_id}"))
    assert f"Approved request #{execution.approval_id}: runbook execution #{execution.id} is queued" in page
    assert "the change ran" not in page and "Ran once" not in page
    outcome = re.search(r"<dt>Outcome</dt><dd>(.*?)</dd>", page, re.S).group(1)
    assert f'href="/runbooks/executions/{execution.id}">execution #{execution.id}</a>' in outcome
    assert "queued" in outcome


def test_a_waiting_params_fix_shows_in_its_dlq_row_in_the_list_and_the_open_group(person, letter):
    client, olga = person("olga", "operator")
    found = letter()
    request = file_fix(found, olga)
    link = f'<a href="/approvals/{request.id}">params fix #{request.id} waiting</a>'
    assert link in html(client.get("/dlq/?view=list"))
    assert link in html(client.get(f"/dlq/?open={found.fingerprint}"))
    assert link in html(client.get(f"/dlq/groups/{found.fingerprint}", headers=HX))


def test_a_waiting_bulk_discard_and_runbook_fix_show_in_their_letters_dlq_rows_and_a_replay_does_not_claim_them(
        person, letter):
    client, olga = person("olga", "operator")
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 1, Actor("root"))
    found, other = letter(), letter()
    discard = bulk_discard.discard([found.id, other.id], "load-test leftovers", Actor("olga", olga.id), None).approval
    fixing = runbooks.start("fix_params_and_replay", {"dead_letter": found.id, "params": {"fail_times": 0}},
                            Actor("olga", olga.id), scope=None, reason="reopened")
    assert fixing.status == "awaiting_approval"
    for page in (html(client.get("/dlq/?view=list")), html(client.get(f"/dlq/groups/{found.fingerprint}",
                                                                      headers={"HX-Request": "true"}))):
        row = re.search(rf'<tr id="dl-{found.id}".*?</tr>', page, re.S).group(0)
        assert f'<a href="/approvals/{discard.id}">bulk discard #{discard.id} waiting</a>' in row
        fix_id = fixing.approval_id
        assert f'<a href="/approvals/{fix_id}">params fix (runbook) #{fix_id} waiting</a>' in row
        assert "is closed then" not in re.search(r'<form [^>]*action="/dlq/\d+/replay"[^>]*>', row).group(0)
        mate = re.search(rf'<tr id="dl-{other.id}".*?</tr>', page, re.S).group(0)
        assert f"bulk discard #{discard.id} waiting" in mate and "(runbook)" not in mate


def test_a_bulk_discard_across_tenants_is_named_to_a_tenants_people_without_a_link_they_cannot_follow(
        person, letter):
    # Its link was a 404 to them, and the refusal of their own discard sent them to a request they could not find.
    acme = make_tenant("acme")
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 1, Actor("root"))
    _, root = person("root", "admin")
    ours, theirs = letter("acme"), letter()
    request = bulk_discard.discard([ours.id, theirs.id], "cross-tenant cleanup", Actor("root", root.id), None).approval
    assert request.tenant_id is None
    approver, _ = person("alex", "approver")
    listed = re.search(rf'<tr>\s*<td class="mono"><a href="/approvals/{request.id}">.*?</tr>',
                       html(approver.get("/approvals/")), re.S).group(0)
    assert '<div class="subtle">across tenants</div>' in listed  # its tenant cell was blank (helper 149)
    client, olga = person("olga", "operator", tenant=acme)
    row = re.search(rf'<tr id="dl-{ours.id}".*?</tr>', html(client.get("/dlq/?view=list")), re.S).group(0)
    assert f"bulk discard #{request.id} waiting, across tenants" in row and f'href="/approvals/{request.id}"' not in row
    bulk_discard.discard([letter("acme").id], "spent my one", Actor("olga", olga.id), acme.id)
    with pytest.raises(Conflict) as refused:
        bulk_discard.discard_one(ours, "the customer left", Actor("olga", olga.id))
    assert refused.value.detail == (f"it waits already in discard request #{request.id} (asked by root, across "
                                    "tenants): an approver who sees every tenant decides it")


def test_a_fix_whose_letter_was_replayed_behind_its_back_says_so_and_the_job_closes_it(person, letter, clock):
    _, olga = person("olga", "operator")
    approver_client, alex = person("alex", "approver")
    found = letter()
    request = file_fix(found, olga)
    # A replay closes the fix itself (tests/web/test_dlq_waiting_fixes.py); one that slipped past it (filed while
    # its letter's replay committed) waits until the job closes it.
    db.session.execute(update(DeadLetter).where(DeadLetter.id == found.id).values(
        status="replayed", resolved_by="bob", resolved_at=clock()))
    db.session.commit()
    page = html(approver_client.get(f"/approvals/{request.id}"))
    assert f"Dead letter {found.id} is no longer open: it was replayed by bob" in page
    assert "Approve and run" not in page  # nothing to approve: it could only fail

    assert params_fix.supersede_settled(clock=clock) == [request.id]  # the maintenance job
    closed = db.session.get(Approval, request.id)
    assert (closed.status, closed.decided_by_id) == ("superseded", None)
    assert closed.outcome.startswith(f"dead letter {found.id} was replayed by bob")
    assert nav_count(html(approver_client.get("/approvals/all"))) is None  # not waiting for anyone
    closed_page = html(approver_client.get(f"/approvals/{request.id}"))
    assert "badge superseded" in closed_page and "nobody yet" not in closed_page
    assert "nobody: what it would change was settled first, and it closed" in closed_page
    # A note of how it closed, not an error: nothing failed.
    assert f'<dd class="note">{closed.outcome}</dd>' in closed_page and "field-error" not in closed_page
    [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "approval.supersede")).scalars()
    assert (entry.actor, entry.target_id) == ("system", str(request.id))
    assert params_fix.supersede_settled(clock=clock) == []


def test_a_runbook_fix_whose_letter_was_replayed_says_so_and_offers_no_approve(person, letter):
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    found = letter()
    # On the real clock, as the page reads it: the request is not expired.
    execution = runbooks.start("fix_params_and_replay", {"dead_letter": found.id, "params": {"fail_times": 0}},
                               Actor("olga", olga.id), scope=None, reason="reopened", enqueue=False)
    assert runbook_runner.preview(execution.id) == "awaiting_approval"
    assert "Approve and run" in html(approver_client.get(f"/approvals/{execution.approval_id}"))
    control.replay(db.session.get(DeadLetter, found.id), Actor("bob"))
    page = html(approver_client.get(f"/approvals/{execution.approval_id}"))
    assert f"Dead letter {found.id} is no longer open: it was replayed by bob" in page
    assert "Approve and run" not in page


def test_an_approved_fix_and_compensation_show_how_their_run_stands_now(person, letter, runs, clock):
    _, olga = person("olga", "operator")
    approver_client, alex = person("alex", "approver")
    found = letter()
    fix = file_fix(found, olga)
    approver_client.post(f"/approvals/{fix.id}/approve",
                         data={"csrf_token": approver_client.csrf(f"/approvals/{fix.id}")})
    assert execute(found.run_id, 0, clock=clock) == "succeeded"
    outcome = re.search(r"<dt>Outcome</dt><dd>(.*?)</dd>", html(approver_client.get(f"/approvals/{fix.id}")), re.S)
    assert f'<a href="/runs/{found.run_id}">run #{found.run_id}</a> replayed as series 2' in outcome.group(1)
    assert "badge succeeded" in outcome.group(1)

    run_id = runs.submit("demo.flaky_compensated", {"fail_times": 0})
    assert execute(run_id, 0, clock=clock) == "succeeded"
    undo = run_compensation.request_compensation(run_id, "step 3 failed", Actor("olga", olga.id))
    # The approver judges the run it undoes: its handler, tenant, params (masked) and result, not "succeeded →
    # compensating" alone (helper 93).
    asked = html(approver_client.get(f"/approvals/{undo.id}"))
    undone = re.search(r'<div class="panel approval-undone">(.*?)</div>\s*</div>\s*</div>', asked, re.S).group(1)
    assert f'<a href="/runs/{run_id}">run #{run_id}</a>' in undone
    assert "<code>python:demo.flaky_compensated</code>" in undone
    assert "&#34;fail_times&#34;: 0" in undone and "Result" in undone and "undo step with the run's params" in undone
    assert "On approval, a worker runs" in undone
    approved = approver_client.post(f"/approvals/{undo.id}/approve",
                                    data={"csrf_token": approver_client.csrf(f"/approvals/{undo.id}")})
    assert approved.status_code == 303 and runs.status(run_id) == "compensating", html(approved)
    assert compensation.execute(run_id, clock=clock) == "compensated"
    outcome = re.search(r"<dt>Outcome</dt><dd>(.*?)</dd>", html(approver_client.get(f"/approvals/{undo.id}")), re.S)
    assert f'<a href="/runs/{run_id}">run #{run_id}</a>' in outcome.group(1)
    assert "badge compensated" in outcome.group(1) and "its undo step succeeded" in outcome.group(1)
    # Past once decided: "On approval, a worker runs" read as still to come (helper 111).
    assert "Approved, a worker ran" in html(approver_client.get(f"/approvals/{undo.id}"))
    assert ("This kind of change is not rolled back from here: an undo step&#39;s effects are the handler&#39;s "
            "own, outside Rebound, and a compensated run is not retried; to do the work again, submit it as a new "
            "run.") in html(approver_client.get(f"/approvals/{undo.id}"))


def test_a_fix_whose_run_died_again_links_the_new_dead_letter(person, letter, runs, clock):
    """It said "now dead" with nowhere to go next."""
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    found = letter()
    fix = file_fix(found, olga, params={**BROKEN, "message": "account 43 is closed"})  # the wrong fix: it dies again
    approver_client.post(f"/approvals/{fix.id}/approve",
                         data={"csrf_token": approver_client.csrf(f"/approvals/{fix.id}")})
    assert execute(found.run_id, 0, clock=clock) == "dead"
    [again] = [one for one in runs.dead_letters(found.run_id) if one.status == "open"]
    outcome = re.search(r"<dt>Outcome</dt><dd>(.*?)</dd>", html(approver_client.get(f"/approvals/{fix.id}")), re.S)
    assert f'· <a href="/dlq/{again.id}">dead letter #{again.id}</a>' in outcome.group(1)


def test_a_requester_withdraws_their_waiting_request_from_its_page_and_it_never_runs(person, letter, runs):
    requester_client, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    request = file_fix(letter(), olga)
    here = f"/approvals/{request.id}"
    assert "/withdraw" not in html(approver_client.get(here))  # the approver rejects instead
    page = html(requester_client.get(here))
    form = re.search(r'<form [^>]*action="/approvals/\d+/withdraw"[^>]*>', page).group(0)
    assert f'hx-post="{here}/withdraw"' in form and "hx-confirm" in form
    other = approver_client.post(f"{here}/withdraw", data={"csrf_token": csrf_from(html(approver_client.get(here)))},
                                 follow_redirects=True)
    assert other.status_code == 403 and "only the person who asked for this change can withdraw it" in html(other)
    done = requester_client.post(f"{here}/withdraw", data={"csrf_token": csrf_from(page),
                                                           "withdraw-note": "wrong letter"})
    assert done.status_code == 303
    page = " ".join(html(requester_client.get(here)).split())
    assert "Withdrew request #" in page and "badge withdrawn" in page and "<dt>Withdrawn by</dt>" in page
    assert "wrong letter" in page and "/withdraw" not in page and "<dt>Expires</dt>" not in page
    db.session.expire_all()
    assert db.session.get(Approval, request.id).status == "withdrawn"
    assert runs.get(request.payload["run_id"]).params == BROKEN  # it never ran
    (entry,) = db.session.execute(select(AuditEntry).where(AuditEntry.action == "approval.withdraw")).scalars()
    assert (entry.actor, entry.note) == ("olga", "wrong letter")
    token = csrf_from(html(approver_client.get(here)))
    late = approver_client.post(f"{here}/approve", data={"csrf_token": token}, follow_redirects=True)
    assert late.status_code == 409 and "is withdrawn, no longer pending" in html(late)


def test_an_approvals_audit_row_names_the_requester_not_their_row_id(person, letter):
    """"requested_by_id: — → 2" named nobody a reader knows."""
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    request = file_fix(letter(), olga)
    approve(approver_client, request)
    (entry,) = db.session.execute(select(AuditEntry).where(AuditEntry.action == "approval.approve")).scalars()
    assert entry.after["requested_by"] == "olga" and "requested_by_id" not in entry.after


def test_a_bulk_discard_rolled_back_in_part_says_which_letters_stay(person, letter, runs, clock):
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 1, Actor("root"))
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    _, bea = person("bea", "approver")
    found = [letter() for _ in range(2)]
    request = bulk_discard.discard([x.id for x in found], "duplicates", Actor("olga", olga.id), None, clock).approval
    decisions.approve(request.id, Actor("bea", bea.id), clock=clock)
    control.retry_now(runs.get(found[0].run_id), Actor("bea"), clock=clock)  # settled another way since
    page = html(approver_client.get(f"/approvals/{request.id}"))
    rolled = approver_client.post(f"/approvals/{request.id}/rollback", data={"csrf_token": csrf_from(page)},
                                  follow_redirects=True)
    assert (f"Rolled back request #{request.id} in part: 1 dead letter reopened; #{found[0].id} stays as now"
            in html(rolled))
    assert "the rows are as they were before it ran" not in html(rolled)
    # And the request's page says so after (it read "rolled back", "discarded 2").
    page = html(approver_client.get(f"/approvals/{request.id}"))
    assert f'<div class="rolled-back-in-part">In part: 1 dead letter reopened; #{found[0].id} stays as now' in page


def test_a_bulk_discard_request_shows_the_approver_what_else_waits_on_its_letters(person, letter):
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 1, Actor("root"))
    _, olga = person("olga", "operator")
    approver_client, _ = person("alex", "approver")
    found = [letter() for _ in range(2)]
    fix = file_fix(found[0], olga)
    request = bulk_discard.discard([x.id for x in found], "duplicates", Actor("olga", olga.id), None).approval
    page = html(approver_client.get(f"/approvals/{request.id}"))
    # Only the requester's confirm said approving closes the params fix (helper 93).
    assert "<th>Also waiting on it</th>" in page
    assert (f'<a href="/approvals/{fix.id}">params fix #{fix.id}</a> <span class="subtle">closed when this is '
            "approved</span>") in page
    assert f'bulk discard #{request.id}</a>' not in page  # not itself
