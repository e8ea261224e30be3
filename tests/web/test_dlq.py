"""The DLQ page: dead letters grouped by error, searched, replayed one by one and in bulk, discarded."""

import html
import json
import re
from datetime import timedelta

import pytest
from rq import Queue
from sqlalchemy import select, text, update

from console.domain.breaker import BreakerSettings
from console.domain.clock import utcnow
from console.domain.errors import shown_message
from console.extensions import db
from console.models import AuditEntry, DeadLetter, Run, Tenant
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.dlq import bulk as dlq_bulk
from console.services.dlq import discards, paced_replay
from console.services.dlq import filters as dlq_filters
from console.services.dlq import groups as dlq
from console.services.dlq.filters import Filters
from console.services.engine import breakers, control, replays
from console.services.engine.breakers import BreakerKey
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants
from console.services.scheduling import tasks
from console.services.system import console_settings
from jobs import bulk
from tests.factories import Runs

HX = {"HX-Request": "true"}
# Many deliberate failures in a row would open the handler's breaker; these tests want dead letters.
LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}


@pytest.fixture
def runs(app):
    return Runs()


@pytest.fixture
def make_dead_letter(runs, clock):
    """Submit a run and execute it: a real dead letter, with its work order. It ran out of its one try, like most
    dead letters (`fatal`: it failed for good instead, which a bulk replay explains first)."""

    def make(message: str, code: str = "fatal", tenant: str = "default", fatal: bool = False) -> DeadLetter:
        params = {"fail_times": 9, "code": code, "message": message, **({"error": "fatal"} if fatal else {})}
        run_id = runs.submit("demo.flaky", params, tenant=tenant, policy={**LENIENT, "max_attempts": 1})
        assert execute(run_id, 0, clock=clock) == "dead"
        (letter,) = runs.dead_letters(run_id)
        return letter

    return make


def tenant(name: str) -> Tenant:
    row = Tenant(name=name)
    db.session.add(row)
    db.session.commit()
    return row


def fresh(letter_id: int) -> DeadLetter:
    db.session.expire_all()
    return db.session.get(DeadLetter, letter_id)


def audits(action: str) -> list[AuditEntry]:
    db.session.expire_all()
    return db.session.execute(select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.seq)
                              ).scalars().all()


def post(client, auth, path: str, data: dict | None = None, htmx: bool = False):
    token = auth.csrf("/dlq/")
    return client.post(path, data={"csrf_token": token, **(data or {})}, headers=HX if htmx else {})


def test_groups_count_open_dead_letters_by_error_fingerprint(client, auth, make_dead_letter):
    closed = [make_dead_letter(f"account {n} is closed", code="invalid_account") for n in (1001, 1002, 1003)]
    locked = make_dead_letter("ledger row locked by another writer", code="lock_timeout")
    other = make_dead_letter("account 1004 is closed", code="invalid_account")
    discards.discard(other, "test account, not real", Actor("test"))

    found = dlq.groups(Filters(), None)
    counts = {g.error_code: g.count for g in found.groups}
    assert counts == {"invalid_account": 3, "lock_timeout": 1} and not found.more and found.total == 4
    group = next(g for g in found.groups if g.error_code == "invalid_account")
    assert group.message == "account <n> is closed" and group.handlers == {"python:demo.flaky"}
    assert group.tenants == {"default"} and group.first_seen <= group.last_seen
    assert [wo.id for wo in group.work_orders] == [closed[0].work_order_id] and group.work_orders[0].status == "open"

    auth.as_role("viewer")
    html = client.get("/dlq/").get_data(as_text=True)
    row = html[html.index(f'id="group-{group.fingerprint}"'):]
    row = row[:row.index("</tbody>")]
    assert "account &lt;n&gt; is closed" in row and "<strong>3</strong>" in row
    assert f"WO #{closed[0].work_order_id}" in row and "demo.flaky" in row
    assert f'id="group-{locked.fingerprint}"' in html
    assert 'data-matching="4"><strong>4</strong> open dead letters</span>' in html


def test_only_someone_who_may_operate_gets_the_actions_column(client, auth, make_dead_letter):
    letter = make_dead_letter("payments-gateway answered 502 for order 77", code="http_502")
    for role, columns in (("viewer", 6), ("manager", 6), ("operator", 8)):  # an operator: the tick box and actions
        auth.as_role(role)
        html = client.get("/dlq/?view=list").get_data(as_text=True)
        head = html[html.index('<table class="dlq-entries">'):html.index("</thead>")]
        row = html[html.index(f'id="dl-{letter.id}"'):]
        row = row[:row.index("</tr>")]
        assert (len(re.findall(r"<th[ >]", head)), len(re.findall(r"<td[ >]", row))) == (columns, columns), role
        assert ('class="actions"' in row) is (role == "operator"), role
        client.post("/logout", data={"csrf_token": auth.csrf()})


def test_search_finds_an_entry_by_a_word_of_its_error_text(client, auth, make_dead_letter):
    gateway = make_dead_letter("payments-gateway answered 502 for order 77", code="http_502")
    ledger = make_dead_letter("ledger row locked", code="lock_timeout")
    auth.as_role("viewer")
    html = client.get("/dlq/?view=list&q=GATEWAY").get_data(as_text=True)
    assert f'id="dl-{gateway.id}"' in html and f'id="dl-{ledger.id}"' not in html
    by_code = client.get("/dlq/?view=list&q=lock_tim").get_data(as_text=True)
    assert f'id="dl-{ledger.id}"' in by_code and f'id="dl-{gateway.id}"' not in by_code
    # LIKE wildcards are searched literally.
    assert f'id="dl-{gateway.id}"' not in client.get("/dlq/?view=list&q=%25").get_data(as_text=True)
    # Search looks through the status asked for: a replayed letter is found among the replayed, or among any.
    replayed = make_dead_letter("ledger row locked again", code="lock_timeout")
    db.session.execute(DeadLetter.__table__.update().where(DeadLetter.id == replayed.id).values(status="replayed"))
    db.session.commit()
    assert f'id="dl-{replayed.id}"' not in client.get("/dlq/?view=list&q=again").get_data(as_text=True)
    for status in ("replayed", "any"):
        html = client.get(f"/dlq/?view=list&q=again&status={status}").get_data(as_text=True)
        assert f'id="dl-{replayed.id}"' in html and f'id="dl-{ledger.id}"' not in html, status
    # The code filter ignores case too, as the Runs page's does.
    upper = client.get("/dlq/?view=list&code=LOCK_TIMEOUT").get_data(as_text=True)
    assert f'id="dl-{ledger.id}"' in upper and f'id="dl-{gateway.id}"' not in upper


def test_search_finds_a_letter_by_its_id_or_its_runs(client, auth, make_dead_letter):
    """A run's id, or "#" and a letter's as the pages write it, found nothing (helper 153)."""
    first = make_dead_letter("ledger row locked", code="lock_timeout")
    other = make_dead_letter("ledger row locked", code="lock_timeout")
    auth.as_role("viewer")
    for q in (f"%23{first.id}", str(first.run_id), f"%23{first.run_id}"):
        html = client.get(f"/dlq/?view=list&q={q}").get_data(as_text=True)
        assert f'id="dl-{first.id}"' in html and f'id="dl-{other.id}"' not in html, q


def test_the_groups_page_on_past_the_largest_with_their_count(client, auth, make_dead_letter, monkeypatch):
    """Only the 50 largest groups were shown, with no count and no way on (helper 153)."""
    monkeypatch.setattr(dlq, "GROUP_LIMIT", 2)
    for size in (5, 4, 3, 2, 1):
        for _ in range(size):
            make_dead_letter(f"failure of size {size}", code=f"code_{size}")
    auth.as_role("viewer")
    first = client.get("/dlq/?tenant=default").get_data(as_text=True)
    assert "Groups 1–2 of 5, the largest first" in first and "Larger groups" not in first
    assert "code_5" in first and "code_4" in first and "code_3" not in first
    assert 'href="/dlq/?groups_from=2&amp;tenant=default"' in first  # on, with the filter kept
    second = client.get("/dlq/?tenant=default&groups_from=2").get_data(as_text=True)
    assert "Groups 3–4 of 5, the largest first" in second and "code_3" in second and "code_5" not in second
    assert 'href="/dlq/?tenant=default"' in second  # back to the first page
    last = client.get("/dlq/?groups_from=4").get_data(as_text=True)
    assert "Groups 5–5 of 5" in last and "code_1" in last and "Smaller groups" not in last
    beyond = client.get("/dlq/?groups_from=40").get_data(as_text=True)  # a link kept while groups went away
    assert "Groups 5–5 of 5" in beyond
    assert client.get("/dlq/?groups_from=-3").status_code == 200


def test_the_bulk_bar_links_to_discarding_all_that_match_filled_in(client, auth, make_dead_letter):
    """Discard took at most a page's ticked rows, each batch over the allowance a request of its own (helper 153)."""
    make_dead_letter("ledger row locked", code="lock_timeout")
    auth.as_role("operator")
    page = client.get("/dlq/?view=list&code=lock_timeout&q=ledger").get_data(as_text=True)
    assert 'href="/runbooks/discard_dead_letters?code=lock_timeout&amp;search=ledger"' in page
    assert "Discard all 1 matching…" in page
    form = client.get("/runbooks/discard_dead_letters?code=lock_timeout&search=ledger").get_data(as_text=True)
    assert 'value="lock_timeout"' in form and 'value="ledger"' in form
    # A period is not the runbook's to say: no link, rather than one that discards more than the list shows.
    assert "Discard all" not in client.get("/dlq/?view=list&since=2026-01-01T00:00").get_data(as_text=True)


def test_the_handler_argument_filters_the_page_as_the_api_does(client, auth, make_dead_letter):
    """`?handler=` was dropped unsaid and every open letter listed (the page's own link names it task=handler:…)."""
    flaky, other = (make_dead_letter("ledger row locked", code="lock_timeout") for _ in range(2))
    db.session.execute(DeadLetter.__table__.update().where(DeadLetter.id == other.id).values(
        handler="python:demo.always_fails"))
    db.session.commit()
    auth.as_role("viewer")
    for handler in ("demo.flaky", "python:demo.flaky"):
        html = client.get(f"/dlq/?view=list&handler={handler}").get_data(as_text=True)
        assert f'id="dl-{flaky.id}"' in html and f'id="dl-{other.id}"' not in html, handler
    both = client.get("/dlq/?view=list&handler=demo.flaky&task=handler:python:demo.always_fails")
    assert "filter by handler or by task, not both" in both.get_data(as_text=True)


@pytest.mark.sqlite_only  # reads SQLite's EXPLAIN QUERY PLAN
def test_the_search_query_leads_with_an_index_on_status(app, make_dead_letter):
    make_dead_letter("payments-gateway answered 502")
    query = dlq_filters.where(select(DeadLetter.id), Filters(q="gateway"), None, dlq.SYSTEM_CLOCK())
    compiled = query.compile(db.engine, compile_kwargs={"literal_binds": True})
    plan = " ".join(str(row[-1]) for row in db.session.execute(text(f"EXPLAIN QUERY PLAN {compiled}")))
    assert re.search(r"USING (COVERING )?INDEX ix_dead_letters_status", plan), plan


def test_search_reads_a_bounded_window_of_the_newest_and_continues_older(client, auth, make_dead_letter,
                                                                         monkeypatch):
    monkeypatch.setattr(dlq_filters, "SEARCH_WINDOW", 2)
    needle = make_dead_letter("needle in the ledger")
    hay = [make_dead_letter(f"hay bale {n}") for n in range(2)]
    first = dlq.entries(Filters(q="needle"), None)
    assert first.entries == [] and first.next_before == hay[0].id
    second = dlq.entries(Filters(q="needle"), None, before=first.next_before)
    assert [x.id for x in second.entries] == [needle.id] and second.next_before is None
    assert dlq.count_matching(Filters(q="needle"), None) == 0
    assert dlq.count_matching(Filters(q="hay"), None) == 2
    auth.as_role("viewer")
    html = client.get("/dlq/?view=list&q=needle").get_data(as_text=True)
    assert "No match in these 2 open dead letters." in html and f"before={hay[0].id}" in html
    assert "Search older →" in html


def test_filters_by_code_tenant_task_and_age(app, make_dead_letter, clock):
    tenant("acme")
    old = make_dead_letter("disk full on node 3", code="disk_full", tenant="acme")
    clock.advance(2 * 3600)
    new = make_dead_letter("disk full on node 4", code="disk_full")
    other = make_dead_letter("quota exceeded", code="quota")

    def ids(**filters):
        return {letter.id for letter in dlq.entries(Filters(**filters), None, clock=clock).entries}

    assert ids(code="disk_full") == {old.id, new.id}
    assert ids(tenant="acme") == {old.id}
    assert ids(age="1h") == {old.id} and ids(age="24h") == set()
    assert ids(task="handler:python:demo.flaky") == {old.id, new.id, other.id}
    assert ids(task="handler:python:demo.noop") == set()
    assert ids(group=new.fingerprint) == {old.id, new.id}
    # A plugin's letters: the filter offers their handler (it offered the registry's and the commands' alone), and
    # a tenant-limited list only its own tenant's (helper 112).
    db.session.execute(update(DeadLetter).where(DeadLetter.id == old.id).values(handler="plugin:payments"))
    db.session.commit()
    assert "plugin:payments" in dlq.handler_choices() and "python:demo.flaky" in dlq.handler_choices()
    assert "plugin:payments" not in dlq.handler_choices(tenants.find("default").id)
    assert ids(task="handler:plugin:payments") == {old.id}
    task = tasks.register(tenants.find("default"), {"name": "nightly ledger sync", "handler": "python:demo.flaky",
                                                    "event": "ledger.closed", "policy": LENIENT,
                                                    "params": {"fail_times": 9, "error": "fatal"}}, Actor("test"))
    run, _ = submit(tenants.find("default"), Actor("test"), task=task)
    assert execute(run.id, 0, clock=clock) == "dead"
    assert {x.task_id for x in dlq.entries(Filters(task=str(task.id)), None, clock=clock).entries} == {task.id}
    assert (str(task.id), "nightly ledger sync · default") in dlq.task_choices(None)
    assert Filters.parse({"age": "forever", "status": "bogus"}) == Filters()


def test_filters_by_creation_window_in_any_status(app, make_dead_letter, clock):
    first = make_dead_letter("disk full on node 3")
    start = clock()
    clock.advance(3600)
    second = make_dead_letter("disk full on node 4")
    control.replay(second, Actor("test"), clock=clock)

    def ids(**args):
        return {letter.id for letter in dlq.entries(Filters.parse(args), None, clock=clock).entries}

    hour = (start + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M")
    assert ids(status="any", since=hour) == {second.id}  # replayed, still counted as created then
    assert ids(status="any", until=hour) == {first.id}
    assert ids(since=hour) == set()  # open only, by default
    assert ids(status="any", since=f"{hour}+02:00") == {first.id, second.id}  # an offset is read as such
    # What is not a date and time is ignored, never a 500.
    assert Filters.parse({"since": "yesterday", "until": "9" * 400}) == Filters()


def test_the_page_says_which_created_dates_it_ignored_or_cannot_match(client, auth, make_dead_letter):
    make_dead_letter("disk full on node 3")
    auth.as_role("viewer")
    bad = client.get("/dlq/?view=list&since=garbage")
    assert bad.status_code == 422
    assert ("since=garbage is not a date and time (YYYY-MM-DDTHH:MM in UTC, or with an offset such as +02:00), so it "
            "is ignored") in bad.get_data(as_text=True)
    inverted = client.get("/dlq/?view=list&status=any&since=2026-12-03T07:40&until=2026-12-03T07:30")
    assert inverted.status_code == 422
    assert "&#39;until&#39; (2026-12-03T07:30) is not after &#39;since&#39; (2026-12-03T07:40)" in \
        inverted.get_data(as_text=True)
    assert client.get("/dlq/?view=list&status=any&since=2026-12-03T07:30").status_code == 200


@pytest.mark.parametrize("query, said", [
    ("task=99999999999999999999", "no task has id 99999999999999999999"),
    ("task=%C2%B2", "task=² is not a task id (a whole number)"),
    ("task=" + "9" * 5000, "no task has id " + "9" * 40 + "…"),  # not echoed whole
    ("since=0001-01-01T00:00", "since=0001-01-01T00:00 is not between the years 1970 and 9998, so it is ignored"),
    ("until=0001-01-01T00:00", "until=0001-01-01T00:00 is not between the years 1970 and 9998, so it is ignored"),
    ("recovered_since=0001-01-01T00:00",
     "recovered_since=0001-01-01T00:00 is not between the years 1970 and 9998, so it is ignored"),
    ("recovered_until=9999-12-31T23:59",
     "recovered_until=9999-12-31T23:59 is not between the years 1970 and 9998, so it is ignored"),
    ("since=9999-12-31T23:59-05:00",  # past the last moment a datetime holds, once in UTC
     "since=9999-12-31T23:59-05:00 is not between the years 1970 and 9998, so it is ignored"),
    ("status=opne", "status=opne is not one of open, replayed, discarded, resolved, any, so it is ignored"),
    ("age=2h", "age=2h is not one of"),
    ("group=not-a-fingerprint", "group=not-a-fingerprint is not an error fingerprint (up to 32 hex digits), so it is "
                                "ignored"),
])
@pytest.mark.parametrize("view", ["list", "groups"])
def test_a_hostile_filter_is_said_on_the_page_never_a_500(client, auth, make_dead_letter, view, query, said):
    make_dead_letter("disk full on node 3")
    auth.as_role("viewer")
    response = client.get(f"/dlq/?view={view}&{query}")
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    assert said.replace("'", "&#39;") in html
    assert 'name="q"' in html  # the page with its filters, to fix it there


def test_entries_page_newest_first_with_keyset_pagination(app, make_dead_letter):
    letters = [make_dead_letter(f"broken thing {n}") for n in range(3)]
    first = dlq.entries(Filters(), None, limit=2)
    assert [x.id for x in first.entries] == [letters[2].id, letters[1].id] and first.next_before == letters[1].id
    rest = dlq.entries(Filters(), None, before=first.next_before, limit=2)
    assert [x.id for x in rest.entries] == [letters[0].id] and rest.next_before is None


def test_the_entries_pager_says_where_a_page_is(client, auth, make_dead_letter):
    for n in range(dlq.PAGE_SIZE + 1):
        make_dead_letter(f"broken thing {n}")
    auth.as_role("viewer")
    first = client.get("/dlq/?view=list").get_data(as_text=True)
    assert re.search(r"data-position>1–50 of 51<", first)
    older = re.search(r'href="(/dlq/\?view=list&amp;before=\d+[^"]*)"', first).group(1).replace("&amp;", "&")
    assert re.search(r"data-position>51–51 of 51<", client.get(older).get_data(as_text=True))
    # A search reads windows of letters: no position it could not stand behind.
    assert "data-position" not in client.get("/dlq/?view=list&q=broken").get_data(as_text=True)


def test_a_letters_address_opens_the_page_of_its_group_that_holds_it(client, auth, make_dead_letter):
    # It opened the group's newest 50: a letter below them had no row there for its #dl- anchor (helper 136).
    letters = [make_dead_letter(f"broken thing {n}") for n in range(dlq.PAGE_SIZE + 2)]
    auth.as_role("viewer")
    for letter in (letters[0], letters[1], letters[2], letters[-1]):
        opened = client.get(f"/dlq/{letter.id}")
        assert opened.status_code == 303 and opened.headers["Location"].endswith(f"#dl-{letter.id}")
        page = client.get(opened.headers["Location"]).get_data(as_text=True)
        assert f'id="dl-{letter.id}"' in page
    # One among the newest page opens that page as its group's own list does, not one starting at the letter.
    assert "before=" not in client.get(f"/dlq/{letters[2].id}").headers["Location"]
    assert "before=" in client.get(f"/dlq/{letters[1].id}").headers["Location"]


def test_one_click_replay_starts_a_new_series_with_the_same_idempotency_key(client, auth, runs, make_dead_letter):
    letter = make_dead_letter("account 1001 is closed")
    key = runs.get(letter.run_id).idempotency_key
    auth.as_role("operator", "olga")
    response = post(client, auth, f"/dlq/{letter.id}/replay", htmx=True)
    assert response.status_code == 200
    fragment = response.get_data(as_text=True)
    assert fragment.lstrip().startswith(f'<tr id="dl-{letter.id}"') and "<html" not in fragment
    assert ">replayed<" in fragment and f'href="/runs/{letter.run_id}"' in fragment and "series 2" in fragment
    run = runs.get(letter.run_id)
    assert (run.status, run.series, run.attempt, run.idempotency_key) == ("pending", 2, 0, key)
    letter = fresh(letter.id)
    assert letter.status == "replayed" and letter.resolved_by == "olga"
    (event,) = runs.events(run.id, "replay_of_dead_letter")
    assert event.data == {"dead_letter_id": letter.id} and event.series == 2
    (entry,) = audits("dead_letter.replay")
    assert entry.actor == "olga" and entry.target_id == str(letter.id) and entry.after["series"] == 2

    again = post(client, auth, f"/dlq/{letter.id}/replay", htmx=True)
    assert again.status_code == 409 and "already replayed" in again.get_data(as_text=True)
    assert "dlq-count" in again.headers["HX-Trigger"]  # a second tab's counts read themselves again (helper 142)
    plain = post(client, auth, f"/dlq/{letter.id}/replay")
    assert plain.status_code == 303 and plain.headers["Location"].endswith("/dlq/")
    # A row inside an expanded group has no selection column, and keeps none after its replay.
    nested = make_dead_letter("account 1002 is closed")
    inside = post(client, auth, f"/dlq/{nested.id}/replay", {"nested": "1"}, htmx=True).get_data(as_text=True)
    assert ">replayed<" in inside and 'class="check"' not in inside


def test_a_row_replayed_on_its_own_follows_its_run_to_the_end(client, auth, runs, make_dead_letter, clock):
    """It read "series 2 pending … 0 s ago" for good while the run succeeded (helper 142)."""
    letter = make_dead_letter("account 1001 is closed")
    auth.as_role("operator", "olga")
    row = post(client, auth, f"/dlq/{letter.id}/replay", htmx=True).get_data(as_text=True)
    polled = f'id="replays-{letter.id}" hx-get="/dlq/{letter.id}/replays" hx-trigger="every 3s"'
    assert polled in row and ">pending<" in row
    assert polled in client.get("/dlq/?view=list&status=any").get_data(as_text=True)  # the page drawn later too
    assert execute(letter.run_id, 0, clock=clock) == "dead"  # the account is still closed
    now = client.get(f"/dlq/{letter.id}/replays", headers=HX)
    text = now.get_data(as_text=True)
    assert now.status_code == 200 and text.lstrip().startswith(f'<div class="replays" id="replays-{letter.id}">')
    assert ">dead<" in text and "hx-get" not in text and "by olga" in text  # ended: it stops asking
    assert client.get("/dlq/999999/replays", headers=HX).status_code == 404


def test_bulk_replay_of_selected_rows_runs_in_the_background(client, auth, runs, make_dead_letter):
    first, second, untouched = (make_dead_letter(f"order {n} failed") for n in (1, 2, 3))
    auth.as_role("operator", "olga")
    response = post(client, auth, "/dlq/bulk/replay", {"id": [first.id, second.id], "rate": "1000",
                                                       "action": "replay"}, htmx=True)
    assert response.status_code == 200
    fragment = response.get_data(as_text=True)
    assert 'class="panel bulk-progress queued"' in fragment and 'hx-trigger="every 1s"' in fragment
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    assert job.func_name == "jobs.bulk.replay_matching" and job.kwargs["ids"] == [first.id, second.id]
    # Waiting for a worker is said, with why (0 of 5,052 "queued" for a minute said nothing; helper 129).
    assert "waiting for a free worker: bulk replays run on the maintenance queue" in fragment
    key = dlq_bulk.KEY.format(job.args[0])  # a minute in, one of two done: half the rate asked, and said so
    get_redis().hset(key, mapping={"status": "running", "done": 1, "rate": 1000})
    get_redis().hset(key, "started_at", (utcnow() - timedelta(seconds=60)).isoformat())
    going = client.get(f"/dlq/bulk/{job.args[0]}?was=running", headers=HX).get_data(as_text=True)
    assert "0.0167 a second so far" in going and "about 1 min 0 s left" in going
    assert "waiting for a free worker" not in going and "data-quiet" not in going
    # Silent for 40 s: said, and whether its next slice only waits for a worker (helper 170: a worker killed
    # mid-slice left "running · 0 of 5,000" for minutes, saying nothing).
    get_redis().hset(key, "beat", (utcnow() - timedelta(seconds=40)).isoformat())
    quiet = client.get(f"/dlq/bulk/{job.args[0]}?was=running", headers=HX).get_data(as_text=True)
    assert re.search(r"no letter replayed for 4\d s: its next slice waits for a free worker", quiet)  # job queued
    get_redis().hset(key, "job_id", "gone")
    quiet = client.get(f"/dlq/bulk/{job.args[0]}?was=running", headers=HX).get_data(as_text=True)
    assert re.search(r"no letter replayed for 4\d s: if its worker stopped, it goes on from the letter after", quiet)
    get_redis().hset(key, mapping={"job_id": job.id, "beat": utcnow().isoformat()})
    get_redis().hset(key, mapping={"status": "queued", "done": 0})

    assert bulk.replay_matching(*job.args, **job.kwargs) == "done"
    assert {fresh(x.id).status for x in (first, second)} == {"replayed"} and fresh(untouched.id).status == "open"
    assert {runs.get(x.run_id).series for x in (first, second)} == {2}
    progress = dlq_bulk.get(job.args[0])
    assert (progress.status, progress.total, progress.done, progress.failed, progress.skipped) == ("done", 2, 2, 0, 0)
    (entry,) = audits("dead_letter.bulk_replay")
    assert entry.actor == "olga" and entry.after == {"count": 2, "rate": 1000.0, "ids": [first.id, second.id]}
    assert len(audits("dead_letter.replay")) == 2

    done = client.get(f"/dlq/bulk/{job.args[0]}?was=running", headers=HX)
    assert "every 1s" not in done.get_data(as_text=True) and done.headers["HX-Trigger"] == "dlq-changed"
    assert ">2 replayed<" in done.get_data(as_text=True) and ">0 could not be replayed<" in done.get_data(as_text=True)
    # "Replayed" is queued again: how the runs end is the workers' to say, and the panel follows it until they have.
    said = lambda html: " ".join(re.search(r"<p class=\"bulk-outcomes\"[^>]*>(.*?)</p>", html, re.S).group(1).split())  # noqa: E731
    text = done.get_data(as_text=True)
    assert re.sub(r"<[^>]+>", "", said(text)).startswith(
        "The 2 replayed runs now: 0 succeeded · 0 died again · 2 not ended yet") and 'hx-trigger="every 5s"' in text
    db.session.execute(update(Run).where(Run.id == first.run_id).values(status="succeeded"))
    db.session.execute(update(Run).where(Run.id == second.run_id).values(status="dead"))
    db.session.commit()
    later = client.get(f"/dlq/bulk/{job.args[0]}?was=done", headers=HX)
    assert re.sub(r"<[^>]+>", "", said(later.get_data(as_text=True))) == (
        "The 2 replayed runs now: 1 succeeded · 1 died again (back in the dead-letter queue) · 0 not ended yet")
    # Settled: it polls no more, and a look at a finished replay does not refresh the list under someone's ticks.
    assert "hx-trigger" not in later.get_data(as_text=True) and "HX-Trigger" not in later.headers
    # It polls no more, so it names the moment it finished and how long it took, not an age that would stand still.
    finished = re.search(r"<span class=\"subtle\" data-finished>finished at <time [^>]*>([^<]+)</time>, "
                         r"in (\d+ s|\d+ min( \d+ s)?)<", done.get_data(as_text=True))
    assert finished and finished.group(1) == f"{progress.finished_at:%H:%M:%S}", done.get_data(as_text=True)


def test_bulk_replay_of_all_matching_a_filter_completes_and_leaves_the_rest(client, auth, runs, make_dead_letter):
    matching = [make_dead_letter(f"payments-gateway answered 502 for order {n}", code="http_502") for n in range(4)]
    others = [make_dead_letter("inventory service unavailable", code="http_503") for _ in range(2)]
    auth.as_role("operator", "olga")
    page = client.get("/dlq/?view=list&code=http_502").get_data(as_text=True)
    assert "Replay all 4 open dead letters that match this filter" in page

    response = post(client, auth, "/dlq/bulk/replay-matching", {"code": "http_502", "rate": "1000", "view": "list"})
    assert response.status_code == 303 and "op=" in response.headers["Location"]
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    op_id = job.args[0]
    assert job.kwargs["filters"]["code"] == "http_502" and job.kwargs["ids"] is None
    # Someone discards one before the job reaches it: it is skipped, not failed.
    discards.discard(fresh(matching[1].id), "duplicate order", Actor("someone"))

    assert bulk.replay_matching(*job.args, **job.kwargs) == "done"
    state = {k.decode(): v.decode() for k, v in get_redis().hgetall(f"rebound:bulk:{op_id}").items()}
    assert (state["status"], state["total"], state["done"], state["failed"], state["skipped"]) == (
        "done", "4", "3", "0", "1")
    assert state["actor"] == "olga" and "http_502" in state["filter"] and state["finished_at"]
    assert [fresh(x.id).status for x in matching] == ["replayed", "discarded", "replayed", "replayed"]
    assert {fresh(x.id).status for x in others} == {"open"} and {runs.get(x.run_id).series for x in others} == {1}
    (entry,) = audits("dead_letter.bulk_replay")
    assert entry.after == {"count": 4, "rate": 1000.0, "filter": {"code": "http_502"}} and entry.actor == "olga"
    # A late duplicate delivery of the finished job does nothing.
    assert bulk.replay_matching(*job.args, **job.kwargs) == "done"
    assert len(audits("dead_letter.replay")) == 3


def test_bulk_replay_honours_the_rate_and_continues_in_slices(app, make_dead_letter, clock):
    letters = [make_dead_letter(f"flaky upstream {n}") for n in range(5)]
    op = dlq_bulk.start_replay(Actor("olga"), None, filters=Filters(), rate=2)
    assert op.total == 5
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    now, slept = [0.0], []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    status = paced_replay.run_replay(op.op_id, **job.kwargs, slice_s=1.5, sleep=sleep, monotonic=lambda: now[0])
    # Two per second, a chunk of two each second: chunks at 0 s and 1 s; at 2 s the 1.5 s slice is up.
    assert status == "running" and slept == [pytest.approx(1.0)] * 2 and dlq_bulk.get(op.op_id).done == 4
    continuation = Queue("maintenance", connection=get_redis()).jobs[-1]
    assert continuation.kwargs["after_id"] == letters[3].id
    assert bulk.replay_matching(*continuation.args, **continuation.kwargs) == "done"
    assert dlq_bulk.get(op.op_id).done == 5 and {fresh(x.id).status for x in letters} == {"replayed"}


def test_a_chunk_replays_in_one_transaction_with_one_audit_row_each_and_a_sound_chain(app, runs, make_dead_letter):
    tenant("acme")
    mine = [make_dead_letter(f"ledger {n} locked") for n in range(3)]
    theirs = make_dead_letter("ledger 9 locked", tenant="acme")
    discards.discard(fresh(mine[1].id), "handled by hand", Actor("someone"))
    default = db.session.execute(select(Tenant.id).where(Tenant.name == "default")).scalar_one()

    outcome = replays.replay_many([x.id for x in (*mine, theirs)], Actor("olga"), tenant_id=default)
    assert outcome.runs == {mine[0].id: mine[0].run_id, mine[2].id: mine[2].run_id}
    assert outcome.skipped == [mine[1].id, theirs.id]
    assert [fresh(x.id).status for x in (*mine, theirs)] == ["replayed", "discarded", "replayed", "open"]
    for letter in (mine[0], mine[2]):
        run = runs.get(letter.run_id)
        assert (run.status, run.series, run.attempt, run.error_code, run.status_reason) == (
            "pending", 2, 0, None, "replay")
        assert [e.kind for e in runs.events(run.id) if e.series == 2] == ["pending", "replay_of_dead_letter"]
    queued = {job.id for job in Queue("default", connection=get_redis()).jobs}
    assert {f"run-{x.run_id}-s2-a0" for x in (mine[0], mine[2])} <= queued
    assert f"run-{mine[1].run_id}-s2-a0" not in queued
    assert [(e.target_id, e.after["series"]) for e in audits("dead_letter.replay")] == [
        (str(mine[0].id), 2), (str(mine[2].id), 2)]
    assert audit.verify(db.session).ok
    # Replaying the same letters again finds nothing to do and writes nothing.
    assert replays.replay_many([mine[0].id], Actor("olga")).runs == {} and len(audits("dead_letter.replay")) == 2


def test_a_bad_entry_fails_alone_and_the_rest_of_its_chunk_is_replayed(app, make_dead_letter, monkeypatch):
    letters = [make_dead_letter(f"upstream {word} refused") for word in ("alpha", "beta", "gamma")]
    op = dlq_bulk.start_replay(Actor("olga"), None, ids=[x.id for x in letters], rate=100)
    record_many = audit.record_many

    def refuse_beta(session, actor, action, target_type, changes, **kwargs):
        if any(change.target_id == letters[1].id for change in changes):
            raise RuntimeError("disk full")
        return record_many(session, actor, action, target_type, changes, **kwargs)

    monkeypatch.setattr(audit, "record_many", refuse_beta)
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    assert bulk.replay_matching(*job.args, **job.kwargs) == "done"
    progress = dlq_bulk.get(op.op_id)
    assert (progress.done, progress.failed, progress.skipped) == (2, 1, 0)
    assert progress.last_error == f"#{letters[1].id}: RuntimeError: disk full"
    assert [fresh(x.id).status for x in letters] == ["replayed", "open", "replayed"]


def test_a_bulk_replay_can_be_stopped(client, auth, make_dead_letter):
    letters = [make_dead_letter(f"flaky upstream {n}") for n in range(3)]
    auth.as_role("operator")
    post(client, auth, "/dlq/bulk/replay-matching", {"rate": "50", "tenant": "default"}, htmx=True)
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    stopped = post(client, auth, f"/dlq/bulk/{job.args[0]}/stop", htmx=True)
    assert stopped.status_code == 200 and "stopping" in stopped.get_data(as_text=True)
    assert bulk.replay_matching(*job.args, **job.kwargs) == "stopped"
    assert {fresh(x.id).status for x in letters} == {"open"}
    # Both rows under the filter's tenant, so the audit's tenant filter finds who started and stopped it; the stop
    # says how far it had come (helper 112).
    (started,) = audits("dead_letter.bulk_replay")
    (stop,) = audits("dead_letter.bulk_replay_stop")
    assert (started.tenant, stop.tenant) == ("default", "default")
    assert stop.after == {"status": "stopping", "processed": 0, "total": 3}


def test_bulk_replay_needs_something_to_replay_and_a_sane_rate(client, auth, make_dead_letter):
    letter = make_dead_letter("account 1001 is closed")
    auth.as_role("operator")
    nothing = post(client, auth, "/dlq/bulk/replay", {"rate": "50"}, htmx=True)
    assert nothing.status_code == 422 and "Select the dead letters to replay" in nothing.get_data(as_text=True)
    for rate in ("5000", "0", "abc", "2.5", ""):
        refused = post(client, auth, "/dlq/bulk/replay", {"id": letter.id, "rate": rate}, htmx=True)
        assert refused.status_code == 422
        said = re.search(r'role="alert">\s*([^<]*?)\s*<', refused.get_data(as_text=True)).group(1)
        assert said == "The rate is a whole number of runs per second, from 1 to 1000", rate  # one sentence
    assert Queue("maintenance", connection=get_redis()).count == 0 and not audits("dead_letter.bulk_replay")


def test_discard_requires_a_reason_and_is_audited(client, auth, make_dead_letter):
    letter = make_dead_letter("account 1001 is closed")
    auth.as_role("operator", "olga")
    plain = post(client, auth, f"/dlq/{letter.id}/discard", {"reason": "  "})
    assert plain.status_code == 303
    assert "a reason is required" in client.get(plain.headers["Location"]).get_data(as_text=True)
    hx = post(client, auth, f"/dlq/{letter.id}/discard", {}, htmx=True)
    assert hx.status_code == 422 and "a reason is required" in hx.get_data(as_text=True)
    assert fresh(letter.id).status == "open" and not audits("dead_letter.discard")

    done = post(client, auth, f"/dlq/{letter.id}/discard", {"reason": "customer closed the account"}, htmx=True)
    assert done.status_code == 200 and ">discarded<" in done.get_data(as_text=True)
    letter = fresh(letter.id)
    assert (letter.status, letter.resolved_by, letter.resolution_note) == (
        "discarded", "olga", "customer closed the account")
    (entry,) = audits("dead_letter.discard")
    assert entry.actor == "olga" and entry.note == "customer closed the account"
    assert entry.before == {"status": "open"} and entry.after["status"] == "discarded"


def test_a_discard_past_the_persons_hour_is_filed_for_approval_from_the_row(client, auth, make_dead_letter):
    console_settings.save(console_settings.DISCARD_WITHOUT_APPROVAL, 0, Actor("root"))
    letter = make_dead_letter("account 1001 is closed")
    auth.as_role("operator", "olga")
    filed = post(client, auth, f"/dlq/{letter.id}/discard", {"reason": "customer closed the account"}, htmx=True)
    page = filed.get_data(as_text=True)
    assert filed.status_code == 200 and "more than the 0 one person may discard in an hour without approval" in page
    assert re.search(r'<a href="/approvals/\d+">request #\d+</a> waits for another person with the approve '
                     r"permission", page)  # linked, as the bulk one's
    assert fresh(letter.id).status == "open" and not audits("dead_letter.discard")


def test_bulk_discard_of_selected_rows(client, auth, make_dead_letter):
    first, second, kept = (make_dead_letter(f"order {n} failed") for n in (1, 2, 3))
    auth.as_role("operator")
    missing = post(client, auth, "/dlq/bulk/discard", {"id": [first.id], "view": "list"}, htmx=True)
    assert missing.status_code == 422 and fresh(first.id).status == "open"
    # The refusal goes above the list: swapped in the list's place, it took the ticked rows with it.
    assert (missing.headers["HX-Retarget"], missing.headers["HX-Reswap"]) == ("#bulk-area", "afterbegin")
    assert "a reason is required" in missing.get_data(as_text=True)
    # Nothing ticked is said first: asked for a reason, a person would type one and be refused again.
    unticked = post(client, auth, "/dlq/bulk/discard", {"view": "list"}, htmx=True)
    assert unticked.status_code == 422 and "Select the dead letters to discard" in unticked.get_data(as_text=True)
    response = post(client, auth, "/dlq/bulk/discard", {"id": [first.id, second.id], "reason": "test orders",
                                                        "view": "list"}, htmx=True)
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and html.lstrip().startswith('<div id="results"')
    assert "Discarded 2 dead letters." in html and f'id="dl-{kept.id}"' in html and f'id="dl-{first.id}"' not in html
    assert [fresh(x.id).status for x in (first, second, kept)] == ["discarded", "discarded", "open"]
    assert len(audits("dead_letter.discard")) == 2


def test_viewers_see_no_buttons_and_get_403_when_posting(client, auth, make_dead_letter):
    letter = make_dead_letter("account 1001 is closed")
    auth.as_role("viewer")
    for url in ("/dlq/", "/dlq/?view=list"):
        html = client.get(url).get_data(as_text=True)
        assert "account 1001 is closed" in html or "account &lt;n&gt; is closed" in html
        assert "dlq-bulk" not in html and "hx-post" not in html and "Discard" not in html
        assert "/replay" not in html and "/discard" not in html and 'method="post" action="/dlq' not in html
    for path, data in ((f"/dlq/{letter.id}/replay", {}), (f"/dlq/{letter.id}/discard", {"reason": "x"}),
                       ("/dlq/bulk/replay", {"id": letter.id, "rate": "50"}), ("/dlq/bulk/replay-matching", {}),
                       ("/dlq/bulk/discard", {"id": letter.id, "reason": "x"})):
        assert post(client, auth, path, data).status_code == 403, path
    assert fresh(letter.id).status == "open" and Queue("maintenance", connection=get_redis()).count == 0


def test_tenant_limited_users_see_and_touch_only_their_tenant(client, auth, make_dead_letter):
    tenant("acme")
    globex = tenant("globex")
    theirs = make_dead_letter("account 1001 is closed", tenant="acme")
    ours = make_dead_letter("account 1002 is closed", tenant="globex")
    auth.make_user("gina", "operator", tenant=globex)
    auth.login("gina")
    refused = client.get("/dlq/?view=list&tenant=acme")  # another tenant's filter is refused, not dropped
    assert refused.status_code == 403 and "only tenant globex" in refused.get_data(as_text=True)
    listing = client.get("/dlq/?view=list").get_data(as_text=True)
    assert f'id="dl-{ours.id}"' in listing and f'id="dl-{theirs.id}"' not in listing
    groups = client.get("/dlq/").get_data(as_text=True)
    assert "<strong>1</strong>" in groups and "acme" not in groups
    assert post(client, auth, f"/dlq/{theirs.id}/replay").status_code == 404
    assert post(client, auth, f"/dlq/{theirs.id}/discard", {"reason": "not mine"}).status_code == 404
    assert client.get(f"/dlq/{theirs.id}").status_code == 404 and client.get(f"/dlq/{ours.id}").status_code == 303
    post(client, auth, "/dlq/bulk/replay", {"id": [theirs.id, ours.id], "rate": "1000"})
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    assert job.kwargs["ids"] == [ours.id] and job.kwargs["tenant_id"] == globex.id
    bulk.replay_matching(*job.args, **job.kwargs)
    assert (fresh(theirs.id).status, fresh(ours.id).status) == ("open", "replayed")
    assert client.get(f"/dlq/bulk/{job.args[0]}", headers=HX).status_code == 200
    # Another tenant's open letter in a crafted bulk discard is skipped, and not called "no longer open" (helper 155).
    discarded = post(client, auth, "/dlq/bulk/discard", {"id": [theirs.id], "reason": "not mine", "view": "list"},
                     htmx=True).get_data(as_text=True)
    assert "Discarded 0 dead letters; 1 skipped (no longer open, or not your tenant&#39;s)." in discarded
    assert fresh(theirs.id).status == "open"


def test_another_tenants_task_as_a_filter_reads_as_no_task_at_all(client, auth, make_dead_letter):
    tenant("acme")
    globex = tenant("globex")
    theirs = tasks.register(tenants.find("acme"), {"name": "acme ledger", "handler": "python:demo.noop",
                                                   "event": "ledger.closed"}, Actor("test"))
    auth.make_user("gina", "viewer", tenant=globex)
    auth.login("gina")
    for view in ("list", "groups"):
        refused = client.get(f"/dlq/?view={view}&task={theirs.id}")  # it said "0 dead letters", as if it had none
        assert refused.status_code == 422
        assert f"no task with id {theirs.id} that you can see" in refused.get_data(as_text=True)
        assert client.get(f"/dlq/?view={view}&task=handler:python:demo.noop").status_code == 200
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("viewer")  # an unscoped person sees it; an id no task has is said to them too
    assert client.get(f"/dlq/?view=list&task={theirs.id}").status_code == 200
    assert "no task with id 987654 that you can see" in client.get("/dlq/?task=987654").get_data(as_text=True)


def test_a_deleted_tasks_filter_stays_picked_in_the_task_list(client, auth, make_dead_letter):
    """Its letters remain; the select offered live tasks only and showed "any" while the filter held."""
    make_dead_letter("disk full on node 3")
    gone = tasks.register(tenants.find("default"), {"name": "old export", "handler": "python:demo.noop",
                                                    "event": "export.done"}, Actor("test"))
    tasks.delete(gone, Actor("test"))
    auth.as_role("viewer")
    page = client.get(f"/dlq/?view=list&task={gone.id}")
    assert page.status_code == 200
    assert f'<option value="{gone.id}" selected>old export (deleted) · default</option>' in page.get_data(as_text=True)
    assert "old export" not in client.get("/dlq/").get_data(as_text=True)  # not offered otherwise


def test_htmx_requests_get_only_the_fragment(client, auth, make_dead_letter):
    letter = make_dead_letter("account 1001 is closed")
    auth.as_role("viewer")
    for url in ("/dlq/", "/dlq/?view=list&q=account"):
        fragment = client.get(url, headers=HX).get_data(as_text=True)
        assert fragment.lstrip().startswith('<div id="results"') and "<html" not in fragment
        assert 'class="dlq-filters' not in fragment
    group = client.get(f"/dlq/groups/{letter.fingerprint}", headers=HX).get_data(as_text=True)
    assert group.lstrip().startswith(f'<tr id="ge-{letter.fingerprint}"') and f'id="dl-{letter.id}"' in group
    full = client.get("/dlq/?view=list").get_data(as_text=True)
    assert "<html" in full and 'hx-push-url="true"' in full and 'class="filters dlq-filters"' in full
    assert client.get("/dlq/groups/x');alert(1);//", headers=HX).status_code == 404
    plain = client.get(f"/dlq/groups/{letter.fingerprint}")
    assert plain.status_code == 302 and f"group={letter.fingerprint}" in plain.headers["Location"]


def test_replayed_entries_link_their_runs_later_series(client, auth, runs, make_dead_letter, clock):
    letter = make_dead_letter("account 1001 is closed")
    auth.as_role("operator")
    post(client, auth, f"/dlq/{letter.id}/replay")
    # The replay fails again: a second dead letter for the same run, series 2.
    assert execute(letter.run_id, 0, clock=clock) == "dead"
    html = client.get("/dlq/?view=list&status=replayed").get_data(as_text=True)
    row = html[html.index(f'id="dl-{letter.id}"'):]
    row = row[:row.index("</tr>")]
    assert f'href="/runs/{letter.run_id}">series 2</a>' in row and ">dead<" in row
    assert f"WO #{letter.work_order_id}" in row
    (second,) = [x for x in runs.dead_letters(letter.run_id) if x.id != letter.id]
    assert second.series == 2 and second.status == "open"
    assert timedelta(0) <= second.created_at - letter.created_at


# ---- the address holds the view; the count follows replays; a group that failed for good asks first ----

def test_a_shared_link_reproduces_the_filtered_view_with_its_group_open(client, auth, make_dead_letter):
    closed = [make_dead_letter(f"account {n} is closed", code="invalid_account") for n in (1, 2)]
    make_dead_letter("inventory service unavailable", code="http_503")
    make_dead_letter("account 3 is closed", code="invalid_account", tenant=tenant("acme").name)
    fingerprint = closed[0].fingerprint
    auth.as_role("viewer", "vic")
    page = client.get(f"/dlq/?tenant=default&code=invalid_account&open={fingerprint}").get_data(as_text=True)
    assert 'selected>default</option>' in page and 'value="invalid_account"' in page
    assert "<strong>2</strong> open dead letters match the filter" in page
    # The group is drawn open, its newest entries inside it, and its button says so.
    assert f'<tr id="ge-{fingerprint}" class="group-entries">' in page
    assert all(f'id="dl-{letter.id}"' in page for letter in closed) and 'aria-expanded="true"' in page
    assert "inventory service" not in page
    # Expanding pushes that address; closing goes back to the one without it.
    plain = client.get("/dlq/?code=invalid_account").get_data(as_text=True)
    assert f'hx-push-url="/dlq/?open={fingerprint}&amp;code=invalid_account"' in plain
    assert 'data-closed-url="/dlq/?code=invalid_account"' in plain
    assert f'<tr id="ge-{fingerprint}" class="group-entries" hidden></tr>' in plain
    # An open= that is no group on the page opens nothing.
    assert 'aria-expanded="true"' not in client.get("/dlq/?open=ffff&code=invalid_account").get_data(as_text=True)
    # view=entries, as the button names the list, shows the list (it showed the groups; helper 164).
    entries = client.get("/dlq/?view=entries&code=invalid_account").text
    assert 'value="list" checked' in entries and all(f'id="dl-{letter.id}"' in entries for letter in closed)


def test_a_row_replay_tells_the_page_to_recount(client, auth, make_dead_letter):
    letter = make_dead_letter("account 1 is closed")
    auth.as_role("operator", "olga")
    page = client.get("/dlq/?view=list").get_data(as_text=True)
    assert 'id="dlq-count"' in page and 'hx-trigger="dlq-count from:body"' in page and 'hx-select="#dlq-count"' in page
    assert 'hx-select-oob="#dlq-bulk"' in page  # "Replay all N matching" follows the count
    grouped = client.get("/dlq/").get_data(as_text=True)
    assert f'hx-trigger="dlq-group-{letter.fingerprint} from:body" hx-select="#gh-{letter.fingerprint}"' in grouped
    # Its buttons must not inherit that hx-select: the expand button's entries would be filtered away.
    assert re.search(rf'<tr id="gh-{letter.fingerprint}"[^>]*hx-disinherit="\*"', grouped)
    response = post(client, auth, f"/dlq/{letter.id}/replay", htmx=True)
    assert response.status_code == 200
    assert json.loads(response.headers["HX-Trigger"]) == {"dlq-count": None, f"dlq-group-{letter.fingerprint}": None}
    recount = client.get("/dlq/?view=list", headers=HX).get_data(as_text=True)
    assert 'data-matching="0"' in recount


def test_replaying_a_group_that_failed_for_good_asks_first(client, auth, runs, make_dead_letter):
    letters = [make_dead_letter(f"account {n} is closed", code="invalid_account", fatal=True) for n in (1, 2)]
    fingerprint = letters[0].fingerprint
    auth.as_role("operator", "olga")
    page = client.get("/dlq/").get_data(as_text=True)
    # Its button sends the bulk bar's pace with it, and asks nothing in a dialog: a page explains instead.
    button = re.search(rf'<button[^>]*name="group" value="{fingerprint}"[^>]*>Replay 2…</button>', page, re.S)
    assert button and 'form="dlq-bulk"' in button.group(0) and "hx-confirm" not in button.group(0)

    # The replay is sent to that page, its pace kept; nothing is replayed.
    response = post(client, auth, "/dlq/bulk/replay-matching", {"group": fingerprint, "rate": "2"})
    assert response.status_code == 303
    assert response.headers["Location"] == f"/dlq/replay/confirm?rate=2&group={fingerprint}"
    assert Queue("maintenance", connection=get_redis()).jobs == []
    assert 'name="rate" value="2"' in client.get(response.headers["Location"]).get_data(as_text=True)
    response = post(client, auth, "/dlq/bulk/replay-matching", {"group": fingerprint, "rate": "50", "fastest": "y"},
                    htmx=True)
    assert response.status_code == 204 and response.headers["HX-Redirect"].startswith("/dlq/replay/confirm?")

    confirm = client.get(response.headers["HX-Redirect"]).get_data(as_text=True)
    assert "2 of the 2" in confirm and "retries: they failed for good" in confirm
    # The group by its code and newest message, as the DLQ shows it, not by its fingerprint.
    assert "open dead letters in group invalid_account “account <n> is closed”" in " ".join(html.unescape(
        confirm).split())
    assert f"in group {fingerprint}" not in confirm
    assert 'value="failed_for_good"' in confirm
    assert 'name="rate" value="50"' in confirm and f"/dlq/{letters[1].id}/fix" in confirm
    assert 'name="fastest" value="y" checked' in confirm
    assert ">Replay all 2 anyway</button>" in confirm  # all that match, not "them" (which ones?; helper 112)
    assert "does not hold replays back" in confirm  # the unpaced choice says what it costs here too
    response = post(client, auth, "/dlq/bulk/replay-matching",
                    {"group": fingerprint, "rate": "50", "confirmed": "failed_for_good"})
    assert response.status_code == 303 and "op=" in response.headers["Location"]
    assert f"group={fingerprint}" in response.headers["Location"]
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    assert job.kwargs["filters"]["group"] == fingerprint


def test_a_groups_replay_pressed_on_a_stale_page_replays_only_the_letters_it_showed(client, auth, make_dead_letter):
    """Two people pressed a group's "Replay 2" seconds apart: the second sent another wave at the letters the first
    wave's runs had just died into again (helper 122)."""
    shown = [make_dead_letter(f"carrier {n} timed out", code="carrier_down") for n in (1, 2)]
    fingerprint = shown[0].fingerprint
    auth.as_role("operator", "olga")
    action = f"/dlq/bulk/replay-matching?upto={shown[1].id}"
    page = client.get("/dlq/").get_data(as_text=True)
    assert f'formaction="{action}"' in page and f'hx-post="{action}"' in page
    replays.replay_many([letter.id for letter in shown], Actor("pat"))  # the first person's wave
    newer = make_dead_letter("carrier 3 timed out", code="carrier_down")  # died since the page was drawn
    assert newer.fingerprint == fingerprint
    response = post(client, auth, action, {"group": fingerprint, "rate": "50"}, htmx=True)
    assert response.status_code == 422 and "No open dead letters to replay" in response.get_data(as_text=True)
    assert fresh(newer.id).status == "open" and Queue("maintenance", connection=get_redis()).jobs == []
    assert response.headers["HX-Trigger"] == "dlq-changed"  # the page reads its groups again (helper 142)
    # The page drawn again offers the newer letter; its replay takes it.
    again = f"/dlq/bulk/replay-matching?upto={newer.id}"
    assert f'formaction="{again}"' in client.get("/dlq/").get_data(as_text=True)
    assert post(client, auth, again, {"group": fingerprint, "rate": "50"}).status_code == 303
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    assert job.kwargs["filters"]["max_id"] == newer.id
    refused = post(client, auth, "/dlq/bulk/replay-matching?upto=x", {"group": fingerprint, "rate": "50"}, htmx=True)
    assert refused.status_code == 422 and "newest dead letter (upto) is not an id" in refused.get_data(
        as_text=True)


def test_replay_all_matching_pressed_on_a_stale_page_replays_only_the_letters_it_showed(client, auth, make_dead_letter):
    """The bar's "Replay all N matching", like a group's button: pressed on a page drawn before someone else replayed
    those letters, it sent a second wave at the letters the first wave's runs died into since (helper 128)."""
    shown = [make_dead_letter(f"carrier {n} timed out", code="carrier_down") for n in (1, 2)]
    auth.as_role("operator", "olga")
    page = client.get("/dlq/?view=list&code=carrier_down").get_data(as_text=True)
    assert f'<input type="hidden" name="upto" value="{shown[1].id}">' in page
    replays.replay_many([letter.id for letter in shown], Actor("pat"))  # the first person's wave
    newer = make_dead_letter("carrier 3 timed out", code="carrier_down")  # died since the page was drawn
    form = {"code": "carrier_down", "rate": "50", "upto": str(shown[1].id)}
    response = post(client, auth, "/dlq/bulk/replay-matching", form, htmx=True)
    assert response.status_code == 422 and "No open dead letters to replay" in response.get_data(as_text=True)
    assert fresh(newer.id).status == "open" and Queue("maintenance", connection=get_redis()).jobs == []
    # The page drawn again offers the newer letter, and its replay takes it.
    assert f'name="upto" value="{newer.id}"' in client.get("/dlq/?view=list&code=carrier_down").get_data(as_text=True)
    assert post(client, auth, "/dlq/bulk/replay-matching", {**form, "upto": str(newer.id)}).status_code == 303
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    assert job.kwargs["filters"]["max_id"] == newer.id
    refused = post(client, auth, "/dlq/bulk/replay-matching", {**form, "upto": "x"}, htmx=True)
    assert refused.status_code == 422 and "newest dead letter (upto) is not an id" in refused.get_data(as_text=True)


def test_the_replay_question_counts_and_replays_only_the_letters_the_page_showed(client, auth, make_dead_letter):
    """Letters that failed for good are asked about on a page of its own: it kept the page's newest letter neither in
    its count nor in its button, so one that died meanwhile was counted and replayed too."""
    shown = make_dead_letter("account 1 is closed", code="invalid_account", fatal=True)
    auth.as_role("operator", "olga")
    newer = make_dead_letter("account 2 is closed", code="invalid_account", fatal=True)
    response = post(client, auth, "/dlq/bulk/replay-matching",
                    {"code": "invalid_account", "rate": "5", "upto": str(shown.id)})
    assert response.headers["Location"] == f"/dlq/replay/confirm?rate=5&upto={shown.id}&code=invalid_account"
    confirm = " ".join(client.get(response.headers["Location"]).get_data(as_text=True).split())
    assert "1 of the 1 open dead letter" in confirm and f"run {shown.run_id}" in confirm
    assert f'<input type="hidden" name="upto" value="{shown.id}">' in confirm
    assert ">Replay it anyway</button>" in confirm
    assert post(client, auth, "/dlq/bulk/replay-matching", {"code": "invalid_account", "rate": "5",
                                                          "confirmed": "failed_for_good",
                                                          "upto": str(shown.id)}).status_code == 303
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    assert job.kwargs["filters"]["max_id"] == shown.id and fresh(newer.id).status == "open"
    assert client.get("/dlq/replay/confirm?code=invalid_account&upto=x").status_code == 422


def test_the_replay_question_opened_from_a_link_asks_what_its_letters_are(client, auth, make_dead_letter):
    """Opened by address on letters that neither failed for good nor are steps (or on none), the page asked
    "Replay workflows' steps alone?" and told a tenant that never had any that someone replayed them."""
    make_dead_letter("carrier timed out", code="carrier_down")
    auth.as_role("operator", "olga")
    plain = " ".join(client.get("/dlq/replay/confirm?code=carrier_down").get_data(as_text=True).split())
    assert "<h1>Replay these dead letters?</h1>" in plain and "workflows' steps" not in plain
    assert "none failed for good or is a workflow's step" in plain
    assert ">Replay it</button>" in plain and "anyway" not in plain
    empty = " ".join(client.get("/dlq/replay/confirm?code=nothing_like_it").get_data(as_text=True).split())
    assert "<h1>Nothing to replay</h1>" in empty and "No open dead letter matches this filter now." in empty
    assert "someone replayed" not in empty and "<button" not in empty.split("<h1>")[1]


def test_replaying_all_that_match_a_filter_asks_first_when_some_failed_for_good(client, auth, make_dead_letter):
    """Not only a group's Replay: the same letters chosen by their code get the same question, once (no dialog)."""
    make_dead_letter("account 1 is closed", code="invalid_account", fatal=True)
    make_dead_letter("account 2 timed out", code="invalid_account")  # ran out of retries: no question alone
    auth.as_role("operator", "olga")
    page = client.get("/dlq/?view=list&code=invalid_account").get_data(as_text=True)
    button = re.search(r'<button[^>]*value="replay_matching"[^>]*>Replay all 2 matching…</button>', page, re.S)
    assert button and "hx-confirm" not in button.group(0)
    response = post(client, auth, "/dlq/bulk/replay-matching", {"code": "invalid_account", "rate": "5"})
    assert response.headers["Location"] == "/dlq/replay/confirm?rate=5&code=invalid_account"
    confirm = " ".join(client.get(response.headers["Location"]).get_data(as_text=True).split())
    assert "1 of the 2 open dead letters with code invalid_account</strong> did not run out of retries" in confirm
    assert Queue("maintenance", connection=get_redis()).jobs == []
    # Those that ran out of retries alone are replayed after the usual dialog.
    other = client.get("/dlq/?view=list&code=invalid_account&q=timed").get_data(as_text=True)
    assert 'hx-confirm="Replay the 1 open dead letter that matches this filter' in other


def test_a_letter_that_failed_for_good_says_so_before_its_own_replay(client, auth, make_dead_letter):
    fatal = make_dead_letter("account 1 is closed", code="invalid_account", fatal=True)
    spent = make_dead_letter("gateway answered 502", code="http_502")
    auth.as_role("operator", "olga")
    page = html.unescape(client.get("/dlq/?view=list").get_data(as_text=True))
    asked = re.search(rf'<form[^>]*action="/dlq/{fatal.id}/replay"[^>]*>', page, re.S).group(0)
    assert ("It failed for good (non retryable), not by running out of retries: unless its cause was fixed, the "
            "same params to the same code will most likely fail the same way.") in asked
    assert "hx-confirm" not in re.search(rf'<form[^>]*action="/dlq/{spent.id}/replay"[^>]*>', page, re.S).group(0)
    # Its run's own Replay says so too; the run that ran out of retries asks only what a replay does.
    run_page = html.unescape(client.get(f"/runs/{fatal.run_id}").get_data(as_text=True))
    asked = re.search(rf'<form[^>]*action="/runs/{fatal.run_id}/retry"[^>]*>', run_page, re.S).group(0)
    assert "It failed for good (non retryable), not by running out of retries" in asked
    run_page = html.unescape(client.get(f"/runs/{spent.run_id}").get_data(as_text=True))
    asked = re.search(rf'<form[^>]*action="/runs/{spent.run_id}/retry"[^>]*>', run_page, re.S).group(0)
    assert "same idempotency key.\"" in asked


def test_a_group_that_ran_out_of_retries_replays_in_one_click(client, auth, runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 9}, policy={**LENIENT, "max_attempts": 1})
    assert execute(run_id, 0, clock=clock) == "dead"
    (letter,) = runs.dead_letters(run_id)
    assert letter.reason == "exhausted"
    auth.as_role("operator", "olga")
    page = client.get("/dlq/").get_data(as_text=True)
    button = re.search(rf'<button[^>]*name="group" value="{letter.fingerprint}"[^>]*>', page, re.S)
    assert button and "at the pace set above?" in button.group(0)  # one click, after the dialog
    response = post(client, auth, "/dlq/bulk/replay-matching", {"group": letter.fingerprint, "rate": "50"})
    assert response.status_code == 303 and "op=" in response.headers["Location"]
    # Its progress card names the group as the page does, by code and message, not by fingerprint.
    progress = client.get(response.headers["Location"]).get_data(as_text=True)
    assert (f"open dead letters in group {letter.error_code} “{shown_message(letter.error_message)}”"
            in html.unescape(progress))
    assert f"in group {letter.fingerprint}" not in progress

def test_one_dead_letter_is_spoken_of_in_the_singular(client, auth, runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 9}, policy={**LENIENT, "max_attempts": 1})
    assert execute(run_id, 0, clock=clock) == "dead"
    auth.as_role("operator", "olga")
    groups = client.get("/dlq/").get_data(as_text=True)
    assert "Replay the 1 open dead letter of this group, at the pace set above?" in groups
    listed = client.get("/dlq/?view=list").get_data(as_text=True)
    assert "Replay the 1 open dead letter that matches this filter, at the rate set here?" in listed
    response = post(client, auth, "/dlq/bulk/replay-matching", {"rate": "50", "view": "list"})
    assert "Started replaying 1 dead letter at 50 runs/s; the panel below follows it." in client.get(
        response.headers["Location"]).get_data(as_text=True)


def test_bulk_replay_as_fast_as_it_safely_can_never_pauses_and_replays_each_letter_once(
        client, auth, make_dead_letter, monkeypatch):
    letters = [make_dead_letter(f"flaky upstream {n}") for n in range(5)]
    auth.as_role("operator", "olga")
    started = post(client, auth, "/dlq/bulk/replay-matching", {"rate": "50", "fastest": "y"}, htmx=True)
    assert started.status_code == 200 and "as fast as it safely can" in started.get_data(as_text=True)
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    assert job.kwargs["rate"] == 0 and dlq_bulk.get(job.args[0]).eta_s(utcnow()) is None
    monkeypatch.setattr(dlq_bulk, "FAST_CHUNK", 2)
    chunks, slept = [], []
    replay_many = replays.replay_many
    monkeypatch.setattr(replays, "replay_many", lambda ids, *a, **kw: chunks.append(len(ids)) or
                        replay_many(ids, *a, **kw))
    assert paced_replay.run_replay(job.args[0], **job.kwargs, sleep=slept.append) == "done"
    assert slept == [] and chunks == [2, 2, 1]
    progress = dlq_bulk.get(job.args[0])
    assert (progress.done, progress.failed, progress.skipped, progress.fastest) == (5, 0, 0, True)
    assert {fresh(x.id).status for x in letters} == {"replayed"}
    assert sorted(int(e.target_id) for e in audits("dead_letter.replay")) == sorted(x.id for x in letters)
    assert audits("dead_letter.bulk_replay")[0].after["rate"] == 0.0
    # Nothing is replayed twice by a late duplicate of the job.
    assert paced_replay.run_replay(job.args[0], **job.kwargs) == "done" and len(audits("dead_letter.replay")) == 5


def test_an_unpaced_bulk_replay_stops_between_chunks(app, make_dead_letter, monkeypatch):
    letters = [make_dead_letter(f"flaky upstream {n}") for n in range(5)]
    op = dlq_bulk.start_replay(Actor("olga"), None, filters=Filters(), rate=dlq_bulk.FASTEST)
    (job,) = Queue("maintenance", connection=get_redis()).jobs
    monkeypatch.setattr(dlq_bulk, "FAST_CHUNK", 2)
    replay_many = replays.replay_many

    def stop_after_the_first_chunk(ids, *args, **kwargs):
        outcome = replay_many(ids, *args, **kwargs)
        dlq_bulk.stop(op.op_id, Actor("bea"), None)
        return outcome

    monkeypatch.setattr(replays, "replay_many", stop_after_the_first_chunk)
    assert paced_replay.run_replay(op.op_id, **job.kwargs) == "stopped"
    assert [fresh(x.id).status for x in letters] == ["replayed"] * 2 + ["open"] * 3
    assert dlq_bulk.get(op.op_id).done == 2


def test_the_api_takes_max_as_the_rate(client, auth, make_dead_letter):
    from tests.factories import bearer

    make_dead_letter("ledger locked")
    headers = bearer(auth.make_user("svc", "operator"))
    response = client.post("/api/dead-letters/replay", json={"filter": {}, "every": True, "rate_per_s": "max"},
                           headers=headers)
    assert response.status_code == 202, response.get_data(as_text=True)
    assert (response.json["rate_per_s"], response.json["eta_s"]) == ("max", None)
    refused = client.post("/api/dead-letters/replay", json={"filter": {}, "every": True, "rate_per_s": "fast"},
                          headers=headers)
    assert refused.status_code == 422 and "'max'" in refused.json["detail"] and refused.json["field"] == "rate_per_s"


@pytest.mark.parametrize(("field", "value", "said"), [
    ("group", "not-a-fingerprint", "group is an error fingerprint: up to 32 hex digits"),
    ("since", "2026-99-99T00:00", "since=2026-99-99T00:00 is not a date and time (YYYY-MM-DDTHH:MM in UTC, or with "
                                  "an offset such as +02:00)"),
    ("age", "forever", "age must be one of 1h, 24h, 7d (older than)"),
    ("status", "lost", "status must be one of open, replayed, discarded, resolved, any"),
])
def test_replaying_all_that_match_a_filter_it_cannot_read_replays_nothing(client, auth, make_dead_letter, field,
                                                                          value, said):
    make_dead_letter("account 1 is closed", code="invalid_account")
    auth.as_role("operator", "olga")
    # The page's own form sends only filters it read; a hand-made request whose filter would be dropped (and so
    # select more letters than asked for) is refused, and says what to fix.
    response = post(client, auth, "/dlq/bulk/replay-matching", {field: value, "rate": "50"}, htmx=True)
    assert response.status_code == 422
    assert f"Fix the filter: {said}; nothing was replayed." in response.get_data(as_text=True)
    response = post(client, auth, "/dlq/bulk/replay-matching", {field: value, "rate": "50"})
    assert response.status_code == 303 and "op=" not in response.headers["Location"]
    assert f"Fix the filter: {said}" in client.get(response.headers["Location"]).get_data(as_text=True)
    assert Queue("maintenance", connection=get_redis()).jobs == []
    confirm = client.get(f"/dlq/replay/confirm?{field}={value}")
    assert confirm.status_code == 422 and said in confirm.get_data(as_text=True)


def test_a_group_whose_handler_has_an_open_breaker_says_so_before_a_replay(client, auth, make_dead_letter):
    letter = make_dead_letter("carrier api down")
    auth.as_role("operator")
    calm = client.get("/dlq/").get_data(as_text=True)
    assert "breaker open" not in calm and "circuit breaker" not in calm
    settings = BreakerSettings(failure_threshold=1, open_s=120)
    breakers.record("python:demo.flaky", False, utcnow(), settings)
    held = client.get("/dlq/").get_data(as_text=True)
    assert ('<a class="badge open" href="/breakers/" title="open: python:demo.flaky; a replayed run waits until it '
            'lets it through">breaker open</a>') in held
    assert ("The circuit breaker of python:demo.flaky is open: the replayed runs wait until it lets them through."
            in html.unescape(held))
    # A single letter's Replay says it too, in the list and in an expanded group (it said nothing, and the run sat
    # in retry_wait for minutes).
    one = "The circuit breaker of python:demo.flaky is open: the replayed run waits until it lets it through."
    for page in ("/dlq/?view=list", f"/dlq/?open={letter.fingerprint}"):
        assert one in html.unescape(client.get(page).get_data(as_text=True)), page
    expanded = client.get(f"/dlq/groups/{letter.fingerprint}", headers={"HX-Request": "true"})  # the expand button's
    assert one in html.unescape(expanded.get_data(as_text=True))
    # The page a group's large or failed-for-good replay goes to first says it too (it said nothing; helper 164).
    confirm = " ".join(re.sub(r"<[^>]+>", "", html.unescape(
        client.get(f"/dlq/replay/confirm?group={letter.fingerprint}").text)).split())
    assert ("The circuit breaker of python:demo.flaky is open: the replayed runs wait until it lets them through "
            "(Breakers).") in confirm


def test_only_an_open_breaker_the_letters_run_counts_on_is_said_before_its_replay(client, auth, make_dead_letter):
    # Any breaker of its handler was: another tenant's own, its tenant's own where its policy counts handler-wide, a
    # half open one whose probe the replay may be (helper 136 saw the replay run 27 ms after such a warning).
    letter = make_dead_letter("carrier api down")  # the default tenant's; its policy's breaker is handler-wide
    handler, settings, now = "python:demo.flaky", BreakerSettings(failure_threshold=1, open_s=120), utcnow()
    breakers.record(BreakerKey(handler, tenant("globex").id), False, now, settings)
    breakers.record(BreakerKey(handler, letter.tenant_id), False, now, settings)
    breakers.record(handler, False, now - timedelta(seconds=300), settings)  # half open by now
    auth.as_role("operator")
    listed = html.unescape(client.get("/dlq/?view=list").get_data(as_text=True))
    assert f'id="dl-{letter.id}"' in listed and "circuit breaker of" not in listed
    assert "circuit breaker of" not in client.get(f"/dlq/replay/confirm?group={letter.fingerprint}").text
    grouped = html.unescape(client.get("/dlq/").get_data(as_text=True))
    assert "breaker open" not in grouped  # by handler and tenant alone, it named breakers its run does not count on
    breakers.record(handler, False, now, settings)  # the one it counts on opens again
    listed = html.unescape(client.get("/dlq/?view=list").get_data(as_text=True))
    assert "The circuit breaker of python:demo.flaky is open: the replayed run waits until it lets it through." \
        in listed
    assert "open: python:demo.flaky; a replayed run waits" in html.unescape(client.get("/dlq/").get_data(as_text=True))
    assert "circuit breaker of python:demo.flaky is open" in client.get("/dlq/replay/confirm").text


def test_the_group_filter_chip_names_the_error_not_its_fingerprint(client, auth, make_dead_letter):
    letter = make_dead_letter("carrier api down for parcel 7", code="carrier_down")
    auth.as_role("viewer")
    page = html.unescape(client.get(f"/dlq/?view=list&group={letter.fingerprint}").get_data(as_text=True))
    chip = re.search(r'<span class="chip" title="error group ([0-9a-f]+)">group (.*?)\s*<a ', page, re.S)
    assert chip.group(1) == letter.fingerprint and chip.group(2) == "carrier_down “carrier api down for parcel <n>”"


def test_a_letters_row_shows_its_runs_params_with_secrets_masked(client, auth, runs, clock):
    """Which order a letter is about took a click into each run page (Sidekiq's Dead tab lists the arguments;
    helper 164); a secret-named field reads *** as on the run page."""
    params = {"fail_times": 9, "code": "card_declined", "message": "card declined", "order": "ord_7",
              "api_key": "sk_live_abcdef123456"}
    run_id = runs.submit("demo.flaky", params, policy={**LENIENT, "max_attempts": 1})
    assert execute(run_id, 0, clock=clock) == "dead"
    (letter,) = runs.dead_letters(run_id)
    auth.as_role("viewer")
    for path in ("/dlq/?view=list", f"/dlq/?open={letter.fingerprint}"):
        row = re.search(rf'<tr id="dl-{letter.id}".*?</tr>', html.unescape(client.get(path).text), re.S).group(0)
        assert '"order": "ord_7"' in row and '"api_key": "***"' in row and "sk_live" not in row, path
