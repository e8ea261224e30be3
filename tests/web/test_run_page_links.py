"""The run page: each failed attempt's traceback and log lines folded under it; dead letter, work order and task
are links; the action that re-runs a finished run is called Replay, as in the DLQ."""

import html

from console.extensions import db
from console.models import DeadLetter, Tenant
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.scheduling import on_demand, tasks

NO_JITTER = {"base_delay_s": 1, "multiplier": 2, "jitter": 0, "max_delay_s": 60, "max_attempts": 2}


def test_each_failed_attempt_shows_its_traceback_and_log_lines_folded(client, auth, runs, clock):
    run_id = runs.submit("demo.flaky", {"fail_times": 5, "log": "calling the ledger with api_key=sk-live-123"},
                         policy=NO_JITTER)
    assert execute(run_id, 0, clock=clock) == "retry_wait"
    clock.set(runs.get(run_id).next_retry_at)
    assert execute(run_id, 1, clock=clock) == "dead"
    auth.as_role("viewer", "vic")
    page = html.unescape(client.get(f"/runs/{run_id}").get_data(as_text=True))
    assert page.count('<details class="diagnostics">') == 2
    assert 'id="attempt-1-1"' in page and 'id="attempt-1-2"' in page
    # Folded under the event that ended each attempt, right after its row.
    first = page.index('<tr class="ev-retry_wait">')
    assert first < page.index('id="attempt-1-1"') < page.index('<tr class="ev-dead">') < page.index('id="attempt-1-2"')
    assert "Traceback (most recent call last)" in page and "RetryableError" in page
    folded = page[page.index('<details class="diagnostics">'):page.index("</details>")]
    assert "calling the ledger with api_key=***" in folded and "sk-live-123" not in folded  # (the params show it)


def test_dead_letter_work_order_and_task_are_links_and_the_action_is_replay(client, auth, runs, clock, dead_run):
    run_id, letter_id = dead_run()
    letter = db.session.get(DeadLetter, letter_id)
    auth.as_role("operator", "olga")
    page = html.unescape(client.get(f"/runs/{run_id}").get_data(as_text=True))
    # Its address, which opens the page of its group that holds it: the run page built the group's newest page, which
    # in a group of more than 50 had no row of an older letter (helper 141).
    assert f'href="/dlq/{letter_id}"' in page
    order = letter.work_order_id
    assert order and f'href="/workorders/{order}">work order #{order}' in page
    assert ">Replay</button>" in page and "Retry now" not in page
    opened = client.get(f"/dlq/{letter_id}")
    assert opened.headers["Location"] == f"/dlq/?view=list&group={letter.fingerprint}#dl-{letter_id}"
    assert f'id="dl-{letter_id}"' in client.get(opened.headers["Location"]).get_data(as_text=True)


def test_the_task_is_a_link(client, auth, clock):
    tenant = db.session.query(Tenant).filter_by(name="default").one()
    task = tasks.register(tenant, {"name": "nightly export", "handler": "demo.noop", "cron": "0 2 * * *"},
                          Actor("test"))
    run_id = on_demand.run_now(task, Actor("test"), clock).run_id
    auth.as_role("viewer", "vic")
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert f'<a href="/tasks/{task.id}"><strong>nightly export</strong></a>' in page
