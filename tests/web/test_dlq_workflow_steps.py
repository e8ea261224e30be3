"""Replaying a saga workflow's dead step runs that step alone: every way to replay it says so before it starts."""

import html
import re

import pytest
from rq import Queue

from console.redis_conn import get_redis
from console.services.actor import Actor
from console.services.dlq.groups import replay_caution
from console.services.engine.execute import execute
from console.services.people import users
from console.services.recovery import decisions, run_compensation
from tests.factories import FATAL, OK, bearer, three_steps
from tests.helpers import HX, confirm_of, csrf_from

LENIENT = {"breaker": {"failure_threshold": 1000, "open_s": 1, "success_threshold": 1}}
ALONE = "A replay runs this step alone: the workflow does not go on from it, and the steps its compensation undid " \
        "stay undone."
AGAIN = "It had succeeded, and its undo failed: a replay runs the step again, not its undo (Retry the undo, on its " \
        "run page, does that)."


@pytest.fixture
def steps(saga):
    """Two undone workflows: #1's step 3 failed for good (steps 2 and 1 undone), #2's step 2 failed to undo."""
    undone, stuck = saga.two_failed()
    saga.advance(stuck)
    saga.advance(undone)
    assert saga.undo(undone, 1) == "compensated"
    saga.advance(undone)
    assert (saga.status(undone), saga.status(stuck)) == ("compensated", "compensation_failed")
    return {"failed": saga.run(undone, 3), "undo": saga.run(stuck, 2), "stuck_failed": saga.run(stuck, 3),
            "undone": undone, "stuck": stuck}


def bulk_replays() -> list:
    """The bulk replays queued (the maintenance queue also carries the workflows' advances)."""
    return [job for job in Queue("maintenance", connection=get_redis()).jobs if job.func_name.startswith("jobs.bulk")]


def post(client, path: str, data: dict):
    token = csrf_from(client.get("/dlq/?view=list").get_data(as_text=True))
    return client.post(path, data={"csrf_token": token, **data})


def test_a_dead_step_says_on_its_run_page_that_a_replay_runs_it_alone(client, auth, steps, runs, clock):
    auth.as_role("operator", "olga")
    failed, undo = steps["failed"], steps["undo"]
    page = client.get(f"/runs/{failed.id}").get_data(as_text=True)
    # It failed for good too: the confirm says so after the workflow's note (it said only the note: helper 92).
    reason = runs.dead_letters(failed.id)[-1].reason
    assert confirm_of(page, f"/runs/{failed.id}/retry").endswith(
        f"Run #{failed.id} is step 3 of workflow #{steps['undone']} (compensated). {ALONE} {replay_caution(reason)}")
    page = client.get(f"/runs/{undo.id}").get_data(as_text=True)
    assert confirm_of(page, f"/runs/{undo.id}/retry").endswith(
        f"Run #{undo.id} is step 2 of workflow #{steps['stuck']} (compensation failed). {AGAIN}")

    # A run outside any workflow says nothing about workflows: only that it failed for good, as its DLQ row does.
    run_id = runs.submit("demo.flaky", FATAL, policy=LENIENT)
    assert execute(run_id, 0, clock=clock) == "dead"
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert confirm_of(page, f"/runs/{run_id}/retry") == (
        f"Replay run #{run_id}? It starts a new attempt series (series 2) with the same idempotency key. "
        f"{replay_caution('non_retryable')}")


def test_a_dead_steps_row_asks_before_its_replay_and_marks_its_box(client, auth, steps, runs, clock):
    # A plain letter that ran out of retries (one that failed for good asks for that reason of its own).
    run_id = runs.submit("demo.flaky", {**FATAL, "error": "retryable"}, policy={**LENIENT, "max_attempts": 1})
    assert execute(run_id, 0, clock=clock) == "dead"
    (plain,) = runs.dead_letters(run_id)
    letters = {name: runs.dead_letters(steps[name].id)[-1] for name in ("failed", "undo")}
    auth.as_role("operator", "olga")
    page = client.get("/dlq/?view=list").get_data(as_text=True)
    assert confirm_of(page, f"/dlq/{letters['failed'].id}/replay") == (
        f"Replay dead letter #{letters['failed'].id} with its params as they are? Run #{steps['failed'].id} is "
        f"step 3 of workflow #{steps['undone']} (compensated). {ALONE} {replay_caution(letters['failed'].reason)}")
    assert confirm_of(page, f"/dlq/{letters['undo'].id}/replay").endswith(AGAIN)
    assert confirm_of(page, f"/dlq/{plain.id}/replay") == ""  # one click, as before
    boxes = {int(value): rest for value, rest in re.findall(r'<input type="checkbox" name="id" value="(\d+)"([^>]*)>',
                                                             page)}
    assert 'data-step="alone"' in boxes[letters["failed"].id] and 'data-step="undo"' in boxes[letters["undo"].id]
    assert "data-step" not in boxes[plain.id]
    assert "data-confirm-steps" in re.search(r"<button[^>]*>Replay selected</button>", page, re.S).group(0)

    # The fix form says the same of the step it would replay.
    form = " ".join(html.unescape(client.get(f"/dlq/{letters['undo'].id}/fix").get_data(as_text=True)).split())
    assert f"is step 2 of workflow #{steps['stuck']} (compensation failed). {AGAIN}" in re.sub(r"<[^>]+>", "", form)


def test_replaying_all_that_match_asks_first_when_workflows_steps_are_among_them(client, auth, saga, runs):
    # Step 1 runs out of retries (nothing before it to undo): a dead letter that did not fail for good.
    step = {"handler": "demo.flaky", "params": {"fail_times": 9}, "policy": {**LENIENT, "max_attempts": 1}}
    workflow_id = saga.submit([step, {"handler": "demo.flaky", "params": OK}])
    assert saga.execute(workflow_id, 1) == "dead"
    saga.advance(workflow_id)
    assert saga.status(workflow_id) == "compensated"
    (letter,) = runs.dead_letters(saga.run(workflow_id, 1).id)
    assert letter.reason == "exhausted"
    auth.as_role("operator", "olga")

    # Its group's Replay goes to the page that explains, as a group that failed for good does.
    page = client.get("/dlq/").get_data(as_text=True)
    button = re.search(rf'<button[^>]*name="group" value="{letter.fingerprint}"[^>]*>[^<]*</button>', page, re.S)
    assert button.group(0).endswith(">Replay 1…</button>") and "hx-confirm" not in button.group(0)
    assert "some are steps of saga workflows" in button.group(0)

    response = post(client, "/dlq/bulk/replay-matching", {"status": "open", "rate": "5"})
    assert response.status_code == 303 and response.headers["Location"].startswith("/dlq/replay/confirm?")
    assert bulk_replays() == []  # nothing replayed yet
    confirm = " ".join(client.get(response.headers["Location"]).get_data(as_text=True).split())
    assert "<h1>Replay workflows&#39; steps alone?</h1>" in confirm and "failed for good (" not in confirm
    said = re.sub(r"<[^>]+>", "", re.search(r"<p data-steps>(.*?)</p>", confirm).group(1)).strip()
    assert said == ("1 of the 1 open dead letters is a step of a saga workflow: a replay runs it alone, and the "
                    "workflow does not go on from it. Where the workflow was undone, the steps its compensation "
                    "undid stay undone.")
    assert ">Replay it anyway</button>" in confirm

    response = post(client, "/dlq/bulk/replay-matching", {"status": "open", "rate": "5",
                                                         "confirmed": "failed_for_good"})
    assert response.status_code == 303 and "op=" in response.headers["Location"]
    assert len(bulk_replays()) == 1


def test_the_confirm_page_counts_the_steps_that_died_undoing_themselves(client, auth, steps, runs):
    auth.as_role("operator", "olga")
    response = post(client, "/dlq/bulk/replay-matching", {"status": "open", "rate": "5"})
    confirm = " ".join(client.get(response.headers["Location"]).get_data(as_text=True).split())
    # All three failed for good (two non-retryable steps 3, one undo that failed), so that question leads.
    assert "<h1>Replay dead letters that failed for good?</h1>" in confirm
    said = html.unescape(re.sub(r"<[^>]+>", "", re.search(r"<p data-steps>(.*?)</p>", confirm).group(1))).strip()
    # Said once above: this paragraph's letters are "them".
    assert said.startswith("All of them are steps of saga workflows: a replay runs each alone")
    assert said.endswith("One of them had succeeded and its undo failed: a replay runs that step again, not its undo "
                         "(Retry the undo, on a run's page, does that).")


def test_a_step_that_died_undoing_itself_has_its_undo_retried_from_its_run_page(client, auth, steps, runs):
    undo, failed = steps["undo"], steps["failed"]
    (letter,) = runs.dead_letters(undo.id)
    auth.as_role("viewer", "vic")
    page = client.get(f"/runs/{undo.id}").get_data(as_text=True)
    assert "Retry the undo" not in page  # viewers read; operators act
    token = csrf_from(page)
    assert client.post(f"/runs/{undo.id}/retry-undo", data={"csrf_token": token}).status_code == 403
    client.post("/logout", data={"csrf_token": token})

    auth.as_role("operator", "olga")
    # The DLQ row points to the run page, where the undo's failed tries are on the timeline.
    row = re.search(rf'<tr id="dl-{letter.id}".*?</tr>', client.get("/dlq/?view=list").get_data(as_text=True), re.S)
    assert f'href="/runs/{undo.id}" title="its undo failed' in row.group(0)
    assert "Retry the undo" not in client.get(f"/runs/{failed.id}").get_data(as_text=True)  # it failed going forward
    page = client.get(f"/runs/{undo.id}").get_data(as_text=True)
    assert confirm_of(page, f"/runs/{undo.id}/retry-undo") == (
        f"Retry the undo of run #{undo.id}? Its handler's undo step runs again (up to 3 tries, with backoff); its "
        f"dead letter counts as replayed until it works. Workflow #{steps['stuck']} goes back to undoing: step 2, "
        "then the steps before it.")
    answer = client.post(f"/runs/{undo.id}/retry-undo", data={"csrf_token": csrf_from(page)}, headers=HX)
    assert answer.status_code == 200
    assert f"Retried the undo of run #{undo.id}: it is now compensating." in answer.get_data(as_text=True)
    assert runs.dead_letters(undo.id)[0].status == "replayed"

    # Asked again (a second tab), it says why not and changes nothing.
    again = client.post(f"/runs/{undo.id}/retry-undo", data={"csrf_token": csrf_from(page)}, headers=HX)
    assert again.status_code == 409
    assert ("only a dead run whose undo failed, or that its error&#39;s severity 3 left for a person, can have its "
            "undo run") in again.get_data(as_text=True)


def test_a_replay_over_the_api_says_what_it_did_to_the_workflow(client, steps, runs):
    operator, _ = users.create("olga", "operator", "correct-horse-battery", Actor("test"))
    failed, undo = steps["failed"], steps["undo"]
    letters = {name: runs.dead_letters(steps[name].id)[-1] for name in ("failed", "undo")}
    read = client.get(f"/api/dead-letters/{letters['failed'].id}", headers=bearer(operator)).get_json()
    assert read["run"]["workflow"] == {"id": steps["undone"], "step": 3}
    replayed = client.post(f"/api/dead-letters/{letters['failed'].id}/replay", headers=bearer(operator)).get_json()
    assert replayed["run_id"] == failed.id and replayed["workflow"] == {
        "id": steps["undone"], "step": 3, "status": "compensated", "note": ALONE}
    replayed = client.post(f"/api/dead-letters/{letters['undo'].id}/replay", headers=bearer(operator)).get_json()
    assert replayed["workflow"] == {"id": steps["stuck"], "step": 2, "status": "compensation_failed", "note": AGAIN}
    assert replayed["run_id"] == undo.id


def test_a_params_fix_of_a_step_says_what_its_replay_does_to_the_workflow_to_the_approver_too(client, auth, steps,
                                                                                                runs):
    """The approver is the last to decide: their page says what the requester's fix form said."""
    olga, _ = users.create("olga", "operator", "correct-horse-battery", Actor("test"))
    letter = runs.dead_letters(steps["failed"].id)[-1]
    filed = client.post(f"/api/dead-letters/{letter.id}/fix", headers=bearer(olga),
                        json={"params": {"fail_times": 0}, "reason": "the carrier is back"})
    assert filed.status_code == 202, filed.get_data(as_text=True)
    assert filed.get_json()["workflow"] == {"id": steps["undone"], "step": 3, "status": "compensated", "note": ALONE}
    auth.as_role("approver", "alex")
    page = " ".join(html.unescape(client.get(f"/approvals/{filed.get_json()['approval_id']}")
                                  .get_data(as_text=True)).split())
    said = f"Run #{steps['failed'].id} is step 3 of workflow #{steps['undone']} (compensated). {ALONE}"
    assert f"data-workflow-step>{said}</div>" in page


def test_compensating_a_step_of_a_workflow_says_the_workflow_stays_as_it_is(client, auth, saga):
    """Compensate… on one succeeded step undoes that step alone: the form and the approver's page say so."""
    done = saga.submit(three_steps(second=OK, third=OK), key="order-9")
    for position in (1, 2, 3):
        assert saga.execute(done, position) == "succeeded"
        saga.advance(done)
    assert saga.status(done) == "succeeded"
    step = saga.run(done, 2)
    said = (f"Run #{step.id} is step 2 of workflow #{done} (succeeded). Compensating runs the undo of step 2 alone: "
            "the workflow's other steps stay as they are, and its status does not change.")
    olga = auth.as_role("operator", "olga")
    page = " ".join(html.unescape(client.get(f"/runs/{step.id}").get_data(as_text=True)).split())
    assert f"data-workflow-step>{said}</div>" in page
    request = run_compensation.request_compensation(step.id, "the order was cancelled", Actor("olga", olga.id))
    approval = " ".join(html.unescape(client.get(f"/approvals/{request.id}").get_data(as_text=True)).split())
    assert f"data-workflow-step>{said}</div>" in approval
    # Decided, it no longer says what approving would do, read from the workflow as it is by then (helper 160).
    decisions.reject(request.id, Actor("alex", auth.make_user("alex", "approver").id), "not needed")
    assert "data-workflow-step" not in client.get(f"/approvals/{request.id}").get_data(as_text=True)
    no_undo = client.get(f"/runs/{saga.run(done, 3).id}").get_data(as_text=True)
    assert "data-workflow-step" not in no_undo  # its handler has no undo step: nothing to compensate, nothing said
