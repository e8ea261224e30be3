"""A params fix waiting for approval closes the moment its dead letter is settled another way, and the person who
settled it is told: a single replay (DLQ or run page), a bulk replay, a discard, a bulk discard, a resolve."""

import re

import pytest
from rq import Queue
from sqlalchemy import event, select

from console.domain.errors import Failure
from console.extensions import db
from console.models import Approval, AuditEntry, DeadLetter, Run
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.dlq import bulk as dlq_bulk
from console.services.dlq import paced_replay
from console.services.dlq import resolve as resolving
from console.services.engine import parking
from console.services.engine.execute import execute
from console.services.recovery import approvals, params_fix
from tests.factories import BROKEN, LENIENT, Runs
from tests.helpers import Auth, csrf_from

HX = {"HX-Request": "true"}


@pytest.fixture
def letter(app, clock):
    """Make a dead letter (its run ran out of its one try, so a replay needs no warning of its own) and return it."""
    runs = Runs()

    def make() -> DeadLetter:
        run_id = runs.submit("demo.flaky", {**BROKEN, "error": "retryable"}, policy={**LENIENT, "max_attempts": 1})
        assert execute(run_id, 0, clock=clock) == "dead"
        return runs.dead_letters(run_id)[0]

    return make


@pytest.fixture
def olga(app):
    """An operator on a browser of her own: (client, user)."""
    client = app.test_client()
    user = Auth(client).make_user("olga", "operator")
    assert Auth(client).login("olga").status_code == 302
    return client, user


def file_fix(letter: DeadLetter, requester) -> Approval:
    return params_fix.request_fix(letter.id, {**BROKEN, "fail_times": 0}, "the account was reopened",
                                  Actor(requester.username, requester.id))


def html(response) -> str:
    return response.get_data(as_text=True)


def post(client, path: str, data: dict | None = None, htmx: bool = False):
    token = csrf_from(html(client.get("/dlq/?view=list")))
    return client.post(path, data={"csrf_token": token, **(data or {})}, headers=HX if htmx else {})


def assert_closed(request: Approval, letter: DeadLetter, how: str, by: str) -> None:
    """The fix is closed as the maintenance job would close it, audited as the settling person's."""
    db.session.expire_all()
    closed = db.session.get(Approval, request.id)
    assert (closed.status, closed.decided_by_id) == ("superseded", None)
    assert closed.outcome.startswith(f"dead letter {letter.id} was {how} by {by} at ")
    # Only a replayed run can die again into a newer letter (a discard's words sent people looking for one).
    assert closed.outcome.endswith("before anyone decided: there is nothing left to fix; " + (
        "file a new request against its newer dead letter if it dies again" if how == "replayed" else
        "nothing of it is left to replay"))
    [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "approval.supersede",
                                                          AuditEntry.target_id == str(request.id))).scalars()
    assert (entry.actor, entry.before, entry.after, entry.note) == (
        by, {"status": "pending"}, {"status": "superseded"}, closed.outcome)
    assert entry.tenant == letter.tenant.name  # its tenant's people read it beside the request's own rows
    assert params_fix.supersede_settled() == []  # nothing left for the job
    assert approvals.waiting_for(None, None, closed.created_at) == 0  # no approver sees it waiting


def test_the_replay_and_discard_buttons_of_a_letter_with_a_waiting_fix_say_they_close_it(olga, letter):
    client, user = olga
    found, plain = letter(), letter()
    request = file_fix(found, user)
    page = html(client.get("/dlq/?view=list"))

    def form(letter_id: int, action: str) -> str:
        return re.search(rf'<form (?:class="inline" )?method="post" action="/dlq/{letter_id}/{action}"[^>]*>',
                         page).group(0)

    closes = f"Params fix #{request.id} waiting for approval is closed then."
    assert f'hx-confirm="Replay dead letter #{found.id} with its params as they are? {closes}"' in form(found.id,
                                                                                                    "replay")
    assert f'hx-confirm="Discard dead letter #{found.id}? {closes}"' in form(found.id, "discard")
    # Nothing waits on the other: replaying and discarding it ask nothing, as before.
    assert "hx-confirm" not in form(plain.id, "replay") and "hx-confirm" not in form(plain.id, "discard")
    run_page = html(client.get(f"/runs/{found.run_id}"))
    assert (f"Replay run #{found.run_id}? It starts a new attempt series (series 2) with the same idempotency key. "
            f"{closes}") in run_page


def confirm_of(page: str, label: str) -> str:
    """Return the hx-confirm text of the bulk bar's button that ends with this label."""
    return html_unescape(re.search(rf'hx-confirm="([^"]*)">{label}</button>', page).group(1))


def html_unescape(text: str) -> str:
    return text.replace("&#39;", "'").replace("&quot;", '"').replace("&amp;", "&")


def test_the_bulk_bar_says_which_waiting_fixes_a_bulk_replay_or_discard_closes(olga, letter):
    client, user = olga
    first, second, third = letter(), letter(), letter()
    fixes = file_fix(first, user), file_fix(second, user)
    page = html(client.get("/dlq/?view=list"))
    assert confirm_of(page, "Replay all 3 matching") == (
        "Replay all 3 open dead letters that match this filter, at the rate set here? 2 params fixes waiting for "
        "approval on them are closed then.")
    # Which rows get ticked is the browser's: each row's box carries its waiting fix for console.js to name
    # (tests/browser/test_dlq_selected.py asks in Chromium).
    boxes = dict(re.findall(r'<input type="checkbox" name="id" value="(\d+)"[^>]*?(?: data-fix="(\d+)")?>', page))
    assert boxes == {str(first.id): str(fixes[0].id), str(second.id): str(fixes[1].id), str(third.id): ""}
    # A filter that leaves the letters with fixes out says nothing of them.
    other = html(client.get(f"/dlq/?view=list&q={first.error_code}-none"))
    assert "closed then" not in other
    # The page that explains a group that failed for good, before its replay, counts them too.
    confirm = html(client.get(f"/dlq/replay/confirm?group={first.fingerprint}"))
    assert "2 params fixes waiting for approval on them are closed by the replay" in " ".join(confirm.split())


def test_a_groups_replay_button_counts_the_waiting_fixes_of_its_letters(app, olga, clock):
    client, user = olga
    runs = Runs()
    letters = []
    for _ in range(2):  # run out of retries: the group's button asks in a dialog, not on a page of its own
        run_id = runs.submit("demo.flaky", {"fail_times": 9}, policy={**LENIENT, "max_attempts": 1})
        assert execute(run_id, 0, clock=clock) == "dead"
        letters += runs.dead_letters(run_id)
    page = html(client.get("/dlq/"))
    assert "waiting for approval" not in page
    params_fix.request_fix(letters[0].id, {"fail_times": 0}, "one more try", Actor(user.username, user.id))
    page = html(client.get("/dlq/"))
    button = re.search(rf'<button[^>]*name="group" value="{letters[0].fingerprint}"[^>]*>', page, re.S).group(0)
    assert ("Replay all 2 open dead letters of this group, at the pace set above? 1 params fix waiting for approval "
            "on them is closed then.") in html_unescape(button)
    assert confirm_of(page, "Replay all 2 matching").endswith("1 params fix waiting for approval on them is closed "
                                                              "then.")


def test_replaying_a_letter_in_the_dlq_closes_its_waiting_fix_and_its_row_says_so(olga, letter):
    client, user = olga
    found = letter()
    request = file_fix(found, user)
    row = post(client, f"/dlq/{found.id}/replay", htmx=True)
    assert row.status_code == 200
    assert_closed(request, found, "replayed", "olga")
    closed = f'The <a href="/approvals/{request.id}">params fix #{request.id}</a> waiting for approval was closed.'
    assert closed in html(row)


def test_a_replay_without_htmx_says_it_in_the_flash(olga, letter):
    client, user = olga
    found = letter()
    request = file_fix(found, user)
    answer = post(client, f"/dlq/{found.id}/replay")
    assert answer.status_code == 303
    assert_closed(request, found, "replayed", "olga")
    assert f"params fix #{request.id} waiting for approval was closed" in html(client.get(answer.location))


def test_discarding_a_letter_closes_its_waiting_fix_and_says_so(olga, letter):
    client, user = olga
    found = letter()
    request = file_fix(found, user)
    row = post(client, f"/dlq/{found.id}/discard", {"reason": "a duplicate order"}, htmx=True)
    assert row.status_code == 200 and "Discarded." in html(row)
    assert_closed(request, found, "discarded", "olga")
    assert f"params fix #{request.id}</a> waiting for approval was closed" in html(row)


def test_replaying_a_letter_closes_the_fix_waiting_on_another_open_letter_of_its_run(olga, letter, clock):
    client, user = olga
    first = letter()
    # A second open letter of the same dead run, as an import or the rollback of a discard leaves one.
    second = parking.park(db.session.get(Run, first.run_id), Failure("bad_account", "account 42 is closed", False),
                          "imported", clock())
    db.session.commit()
    request = file_fix(second, user)
    row = post(client, f"/dlq/{first.id}/replay", htmx=True)
    assert row.status_code == 200
    assert_closed(request, second, "replayed", "olga")  # at once, not by the maintenance job
    assert f"params fix #{request.id}</a> waiting for approval was closed" in html(row)


def test_a_bulk_discard_closes_the_waiting_fixes_of_its_letters_and_names_them(olga, letter):
    client, user = olga
    first, second, bare = letter(), letter(), letter()
    requests = [file_fix(first, user), file_fix(second, user)]
    answer = post(client, "/dlq/bulk/discard", {"id": [first.id, second.id, bare.id], "reason": "duplicates"})
    assert answer.status_code == 303
    assert_closed(requests[0], first, "discarded", "olga")
    assert_closed(requests[1], second, "discarded", "olga")
    assert (f"Discarded 3 dead letters; params fixes #{requests[0].id}, #{requests[1].id} waiting for approval were "
            "closed.") in html(client.get(answer.location))


def test_a_bulk_replay_closes_the_waiting_fixes_of_the_letters_it_replays_and_counts_them(olga, letter):
    client, user = olga
    found, bare = letter(), letter()
    request = file_fix(found, user)
    op = dlq_bulk.start_replay(Actor("olga", user.id), None, ids=[found.id, bare.id], rate=100)
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    assert paced_replay.run_replay(job.args[0], **job.kwargs) == "done"
    assert_closed(request, found, "replayed", "olga")
    progress = dlq_bulk.get(op.op_id)
    assert (progress.done, progress.fixes_closed) == (2, 1)
    assert "1 params fix waiting for approval closed" in html(client.get(f"/dlq/bulk/{op.op_id}", headers=HX))


def test_replaying_a_dead_run_on_its_page_closes_its_letters_waiting_fix(olga, letter):
    client, user = olga
    found = letter()
    request = file_fix(found, user)
    token = csrf_from(html(client.get(f"/runs/{found.run_id}")))
    answer = client.post(f"/runs/{found.run_id}/retry", data={"csrf_token": token}, headers=HX)
    assert answer.status_code == 200
    assert_closed(request, found, "replayed", "olga")
    assert f"params fix #{request.id} waiting for approval was closed" in html(answer)


def test_resolving_a_dead_run_closes_its_letters_waiting_fix(app, olga, letter, clock):
    _, user = olga
    found = letter()
    request = file_fix(found, user)
    done = resolving.resolve(resolving.plan([found.run_id], None), "handled by hand", Actor("olga", user.id), clock())
    db.session.commit()
    assert_closed(request, found, "resolved", "olga")
    assert done.closed_fixes == [request.id]


def test_a_searched_page_reads_its_search_window_once_for_its_rows_and_counts(olga, letter):
    """The rows, "Replay all N matching" and the fixes it closes share one search window (one read of its floor)."""
    client, user = olga
    found = letter()
    file_fix(found, user)
    floors = []

    def record(connection, cursor, statement, *args):
        words = " ".join(statement.split())  # the floor: the newest open letters' ids, SEARCH_WINDOW down
        if words.startswith("SELECT dead_letters.id FROM dead_letters WHERE dead_letters.status") \
                and "OFFSET" in words and "LIKE" not in words:
            floors.append(words)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        for path in ("/dlq/?view=list&q=account", "/dlq/?q=account",
                     f"/dlq/replay/confirm?q=account&group={found.fingerprint}"):
            floors.clear()
            page = " ".join(html(client.get(path)).split())
            assert "1 params fix waiting for approval on them" in page, path
            assert len(floors) == 1, (path, floors)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
