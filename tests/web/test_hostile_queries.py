"""Every page and API read, given hostile query arguments, answers with a page or a 4xx that says what to fix: never
a 500. Blank, huge, negative, non-numeric, bidi-control and over-long values, for the names the filters use."""

import re
from urllib.parse import quote

import pytest

from tests.factories import bearer

# The query arguments the console's pages and the API read, between them.
NAMES = ("page", "before", "after", "status", "tenant", "task", "period", "from", "to", "since", "until", "q",
         "limit", "kind", "tab", "view", "handler", "code", "per_page", "open", "group", "age", "created_from",
         "created_to", "ended_from", "error_code", "failed", "late", "metric", "day", "rate", "op", "mine")
HOSTILE = ("  ", "-1", "99999999999999999999999", "1e309", "nan", "%ff%fe", "\u202e1", "x" * 3000, "0x10", "[]",
           "9" * 5000)  # more digits than int() reads: the API's limit, before and task were a 500
# Not pages: the log-out link (it would end the session), static files.
SKIPPED = {"auth.logout", "static"}


def read_routes(app) -> list[str]:
    """Every GET route's path, its ids filled with 1."""
    paths = []
    for rule in app.url_map.iter_rules():
        if "GET" not in rule.methods or rule.endpoint in SKIPPED:
            continue
        paths.append(re.sub(r"<(?:[a-z]+:)?[a-z_]+>", "1", rule.rule))
    return sorted(set(paths))


@pytest.mark.parametrize("value", HOSTILE, ids=["blank", "negative", "huge", "overflow", "nan", "bad-utf8", "bidi",
                                                 "long", "hex", "brackets", "past-int-digits"])
def test_no_read_answers_a_hostile_query_with_a_500(app, client, auth, dead_run, value):
    dead_run()  # a run, its dead letter and work order: the pages with id 1 have something to show
    admin = auth.as_role("admin")
    token = bearer(admin)  # the API reads take a token (the pages read the session)
    query = "&".join(f"{name}={quote(value, safe='%')}" for name in NAMES)
    answers = {path: client.get(f"{path}?{query}", headers=token).status_code for path in read_routes(app)}
    assert {path: status for path, status in answers.items() if status >= 500} == {}
    # Read as the admin, not refused for want of a log-in: each shows, or refuses the input or the id.
    assert {path: status for path, status in answers.items() if status == 401} == {}


# Routes named by a word, not an id: one real name each, so the page behind them is rendered too.
NAMED = ("/runbooks/replay_dead_letters", "/runbooks/resolve_runs", "/runbooks/fix_params_and_replay")


def test_no_page_asked_for_by_htmx_answers_with_a_500(app, client, auth, dead_run):
    """A page asked for with htmx's header renders its block: four did a 500 ('ui' is undefined) when a request
    the console never sends asked for one."""
    dead_run()
    auth.as_role("admin")
    paths = [*read_routes(app), *NAMED]
    answers = {path: answer(client, path, {"HX-Request": "true"}) for path in paths}
    assert {path: status for path, status in answers.items() if status == 500} == {}


def answer(client, path: str, headers: dict) -> int | str:
    """The status a GET answers, or 500 for an error the test app raises instead of answering it."""
    try:
        return client.get(path, headers=headers).status_code
    except Exception:  # noqa: BLE001 - the test client raises what a server would answer with a 500
        return 500


def test_no_read_answers_one_blank_argument_with_a_500(app, client, auth, dead_run):
    """Given with the others, a blank argument met a refusal of another first: `per_page` of spaces alone was a 500
    on Runs (WTForms' Optional() keeps the spaces; helper 155)."""
    dead_run()
    token = bearer(auth.as_role("admin"))
    answers = {(path, name): client.get(f"{path}?{name}=%20%09", headers=token).status_code
               for path in read_routes(app) for name in NAMES}
    assert {found: status for found, status in answers.items() if status >= 500} == {}
