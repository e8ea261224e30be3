"""Every console page while Redis does not answer: it is drawn (saying what it cannot read), never a 500.

The README: "If Redis stops answering … pages say Redis is unreachable". The DLQ page, the on-call engineer's recovery
page, was a 500 during a Redis incident (its bulk operations' panel read Redis unguarded; helper 132).
"""

import pytest
from rq import Queue
from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry, DeadLetter
from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.dlq import bulk as dlq_bulk
from console.services.engine.execute import execute
from tests.conftest import redis_unreachable
from tests.factories import LENIENT, Runs, bearer

PAGES = ("/overview", "/runs", "/runs/timeline", "/runs/workflows", "/runs/new", "/dlq/", "/dlq/?view=list",
         "/dlq/{letter}", "/dlq/groups/{fingerprint}", "/dlq/replay/confirm?code=carrier_down", "/dlq/{letter}/fix",
         "/dlq/bulk/{op}", "/runs/{run}", "/workorders", "/workorders/{order}", "/tasks", "/tasks/new", "/queues/",
         "/breakers/", "/policies/", "/approvals", "/runbooks", "/reports", "/reports/breaches", "/audit/",
         "/admin/users", "/admin/tokens", "/admin/channels", "/admin/alert-rules", "/admin/tenants")


@pytest.fixture
def world(app, clock):
    """A dead letter with its work order and a bulk replay of it, made while Redis answers."""
    runs = Runs()
    run_id = runs.submit("demo.flaky", {"fail_times": 9, "code": "carrier_down"},
                         policy={**LENIENT, "max_attempts": 1})
    assert execute(run_id, 0, clock=clock) == "dead"
    (letter,) = runs.dead_letters(run_id)
    op = dlq_bulk.start_replay(Actor("olga"), None, ids=[letter.id])
    return {"letter": letter.id, "fingerprint": letter.fingerprint, "op": op.op_id, "run": run_id,
            "order": letter.work_order_id}


@pytest.mark.parametrize("path", PAGES)
def test_a_page_is_drawn_while_redis_does_not_answer(app, client, auth, world, path):
    auth.as_role("admin")
    with redis_unreachable(app):
        response = client.get(path.format(**world), follow_redirects=True)  # a letter's address opens the DLQ
        again = client.get(path.format(**world), headers={"HX-Request": "true"},  # its live refresh, where it has one
                           follow_redirects=True)
    assert response.status_code == 200, response.get_data(as_text=True)[:2000]
    assert again.status_code == 200


def test_the_dlq_says_what_it_cannot_read_and_an_action_that_needs_redis_says_it_was_not_done(app, client, auth,
                                                                                            world):
    auth.as_role("operator", "olga")
    token = auth.csrf("/dlq/")
    queued = len(Queue("maintenance", connection=get_redis()).jobs)
    with redis_unreachable(app):
        page = " ".join(client.get("/dlq/?op={op}".format(**world)).get_data(as_text=True).split())
        progress = client.get("/dlq/bulk/{op}?was=running".format(**world), headers={"HX-Request": "true"})
        bulk = client.post("/dlq/bulk/replay-matching", data={"csrf_token": token, "code": "carrier_down", "rate": "5"})
        replayed = client.post("/dlq/{letter}/replay".format(**world), data={"csrf_token": token})
    assert "<strong>Redis is unreachable.</strong> Bulk replays' progress cannot be read" in page
    assert "a bulk replay cannot start until it answers" in page and "a letter's own Replay is taken" in page
    assert "carrier_down" in page  # the letters are the database's
    panel = progress.get_data(as_text=True)
    assert progress.status_code == 200 and 'hx-trigger="every 5s"' in panel and "Redis is unreachable" in panel
    # A bulk replay's job is Redis's: nothing started, and nothing audited.
    assert bulk.status_code == 503 and bulk.headers["Retry-After"]
    assert "Redis did not answer (it may be down, restarting or paused), so this did not go through" in bulk.get_data(
        as_text=True)
    assert len(Queue("maintenance", connection=get_redis()).jobs) == queued
    assert len(audit_rows("dead_letter.bulk_replay")) == 1  # the world's own
    # A letter's own Replay is the database's: its run is queued once Redis answers (the reconciler).
    assert replayed.status_code == 303 and db.session.get(DeadLetter, world["letter"]).status == "replayed"


def test_an_api_call_that_needs_redis_says_so(app, client, auth, world):
    headers = bearer(auth.make_user("ada", "admin"))
    with redis_unreachable(app):
        answer = client.post("/api/dead-letters/replay", json={"ids": [world["letter"]]}, headers=headers)
    assert answer.status_code == 503 and answer.get_json()["error"] == "redis_unavailable"


def audit_rows(action: str) -> list[AuditEntry]:
    db.session.expire_all()
    return db.session.execute(select(AuditEntry).where(AuditEntry.action == action)).scalars().all()
