"""Runs → Workflows: submit one from a form (field errors at the field), read its steps and compensation trail."""

import json
import re
from html import unescape

from sqlalchemy import func, select

from console.domain.breaker import BreakerSettings
from console.extensions import db
from console.models import DeadLetter, Run, Workflow
from console.services.actor import Actor
from console.services.dlq import discards
from console.services.engine import breakers, control
from console.services.policies import versions as policies
from tests.factories import make_tenant, three_steps
from tests.helpers import csrf_from


def form_fields(page: str) -> dict:
    """Pull the hidden fields (CSRF token, idempotency key) out of the rendered form."""
    key = page.split('name="idempotency_key"', 1)[1].split('value="', 1)[1].split('"', 1)[0]
    return {"csrf_token": csrf_from(page), "idempotency_key": key}


def post_form(client, **fields):
    page = client.get("/runs/workflows/new")
    assert page.status_code == 200
    return client.post("/runs/workflows/new", data={**form_fields(page.get_data(as_text=True)), "tenant": "default",
                                                    "name": "ship order 7", **fields})


def workflow_count() -> int:
    count = db.session.execute(select(func.count()).select_from(Workflow)).scalar_one()
    db.session.rollback()
    return count


def test_an_operator_submits_a_workflow_from_the_form_and_lands_on_its_page(client, auth, saga):
    auth.as_role("operator", "olga")
    page = client.get("/runs/workflows/new").get_data(as_text=True)
    assert "python:demo.flaky_compensated</code> <span class=\"badge compensated\">undo" in page
    fields = form_fields(page)
    data = {**fields, "tenant": "default", "name": "ship order 7", "steps": json.dumps(three_steps())}
    response = client.post("/runs/workflows/new", data=data)
    assert response.status_code == 303
    workflow = db.session.execute(select(Workflow)).scalar_one()
    assert response.headers["Location"].endswith(f"/runs/workflows/{workflow.id}")
    assert (workflow.name, workflow.created_by, workflow.idempotency_key) == (
        "ship order 7", "olga", fields["idempotency_key"])
    shown = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Submitted workflow" in shown and "step 1 of 3" in shown
    assert f'href="/runs/{saga.run(workflow.id, 1).id}"' in shown
    # The same form sent again (a double click) is the same workflow.
    again = client.post("/runs/workflows/new", data=data)
    assert again.status_code == 303 and again.headers["Location"] == response.headers["Location"]
    assert workflow_count() == 1
    assert "already submitted" in client.get(again.headers["Location"]).get_data(as_text=True)


def test_bad_steps_are_shown_at_the_steps_field_and_nothing_is_submitted(client, auth):
    auth.as_role("operator")
    cases = [("[{\"handler\": ", "steps is not valid JSON"), ("[]", "steps is a non-empty list"),
             (json.dumps([{"handler": "demo.noop"}, {"handler": "demo.nope"}]), "step 2: no Python handler"),
             (json.dumps([{"handler": "demo.noop", "params": [1]}]), "step 1: params must be a JSON object"),
             (json.dumps([{"handler": "demo.noop"}] * 21), "a workflow has at most 20 steps"),
             ('[{"handler": "demo.noop", "handler": "demo.flaky"}]',
              "steps: the key &#39;handler&#39; is given twice in one object: give it once")]
    for steps, message in cases:
        response = post_form(client, steps=steps)
        page = response.get_data(as_text=True)
        assert response.status_code == 422, steps
        assert f'<div class="field-error" role="alert" id="steps-error">{message}' in page.replace("&#34;", '"'), page
        assert steps.replace('"', "&#34;") in page  # what was typed is kept
    response = post_form(client, name="", steps=json.dumps([{"handler": "demo.noop"}]))
    assert response.status_code == 422 and 'id="name-error"' in response.get_data(as_text=True)
    assert workflow_count() == 0


def test_a_tenant_limited_operator_cannot_submit_for_another_tenant(client, auth):
    acme = make_tenant("acme")
    auth.make_user("ann", "operator", tenant=acme)
    auth.login("ann")
    page = client.get("/runs/workflows/new").get_data(as_text=True)
    assert '<option selected value="acme">acme</option>' in page and 'value="default"' not in page
    response = client.post("/runs/workflows/new", data={**form_fields(page), "tenant": "default", "name": "x",
                                                        "steps": json.dumps([{"handler": "demo.noop"}])})
    assert response.status_code == 403 and "only for tenant acme" in response.get_data(as_text=True)
    assert workflow_count() == 0


def test_a_viewer_sees_workflows_but_no_form(client, auth, saga):
    workflow_id = saga.submit(three_steps())
    auth.as_role("viewer")
    listing = client.get("/runs/workflows").get_data(as_text=True)
    assert f'href="/runs/workflows/{workflow_id}"' in listing and "ship order 7" in listing
    assert "New workflow" not in listing
    assert client.get("/runs/workflows/new").status_code == 403
    assert client.post("/runs/workflows/new", data={"csrf_token": auth.csrf("/runs/workflows")}).status_code == 403


def test_the_page_shows_each_steps_undo_and_the_trail_and_runs_link_back(client, auth, saga):
    workflow_id = saga.submit(three_steps())
    for position in (1, 2, 3):
        saga.execute(workflow_id, position)
        saga.advance(workflow_id)
    saga.undo(workflow_id, 2)
    saga.advance(workflow_id)
    auth.as_role("viewer")
    page = client.get(f"/runs/workflows/{workflow_id}").get_data(as_text=True)
    assert "step 3 failed · undoing step 1" in page and 'hx-trigger="every 2s"' in page
    trail = page.split("Compensation trail", 1)[1].split("</h2>", 1)[1]
    assert trail.count("undo asked for") == 2 and "undo try failed" in trail and "undo_flaky" in trail
    assert trail.index("undo try failed") < trail.index("undone")
    second = saga.run(workflow_id, 2)
    assert f'<a href="/runs/{second.id}">#{second.id}</a>' in page

    run_page = client.get(f"/runs/{second.id}").get_data(as_text=True)
    assert f'<a href="/runs/workflows/{workflow_id}">#{workflow_id} ship order 7</a> · step 2 of 3' in run_page
    listing = client.get("/runs").get_data(as_text=True)
    assert f"workflow #{workflow_id} · step 2" in listing

    saga.undo(workflow_id, 1)
    saga.advance(workflow_id)
    done = client.get(f"/runs/workflows/{workflow_id}").get_data(as_text=True)
    assert 'badge compensated' in done and 'hx-trigger="every 2s"' not in done


def test_a_step_held_by_its_breaker_says_why_and_a_named_policy_is_labelled(client, auth, saga):
    policies.save("careful", {"max_attempts": 2}, Actor("test"))
    workflow_id = saga.submit([{"handler": "demo.noop", "policy": "careful"}, {"handler": "demo.noop"}])
    now = saga.clock()
    for _ in range(5):  # the default policy's threshold: the handler's breaker opens
        breakers.record("python:demo.noop", False, now, BreakerSettings(failure_threshold=5, open_s=60))
    assert saga.execute(workflow_id, 1) == "breaker_open"  # put off before any attempt was spent
    auth.as_role("viewer")
    page = " ".join(client.get(f"/runs/workflows/{workflow_id}").get_data(as_text=True).split())
    row = re.search(r'<tr class="wf-current">(.*?)</tr>', page).group(1)
    assert '<span class="subtle reason">breaker open</span>' in row and "attempt 0" not in row
    assert '<span class="subtle">policy careful</span>' in row


def failed_at_step_two(saga) -> int:
    """A workflow whose second step died for good after its first succeeded; its compensation has begun."""
    workflow_id = saga.submit([{"handler": "demo.noop"}, {"handler": "demo.flaky", "params": {
        "fail_times": 9, "error": "fatal"}}])
    for position in (1, 2):
        saga.execute(workflow_id, position)
        saga.advance(workflow_id)
    return workflow_id


def test_a_workflow_that_needs_a_person_says_so(client, auth, saga):
    workflow_id = failed_at_step_two(saga)
    saga.undo(workflow_id, 1)
    saga.advance(workflow_id)
    auth.as_role("viewer")
    page = client.get(f"/runs/workflows/{workflow_id}").get_data(as_text=True)
    assert "A person takes over:" in page and "step 1 is not compensable" in page
    assert "Your role reads this workflow: a person with the operate permission does what these lines say." in page
    assert "badge not_compensable" in page
    step_one = saga.run(workflow_id, 1).id
    # Its duration is its handler's, not the time until its undo was found impossible.
    run_page = " ".join(client.get(f"/runs/{step_one}").get_data(as_text=True).split())
    assert "· its handler, which succeeded" in run_page and "its undo failed for good at the Finished time" in run_page
    link = f'<a href="/runbooks/resolve_runs\\?runs={step_one}&amp;tenant=default">mark its run resolved</a>'
    # Step 1 has no steps before it to go on to (helper 148); with no undo step to run, this is the only way on, not
    # an "Or" after nothing (helper 150).
    assert re.search(rf"Undo step 1 by hand, then {link}:\s+the workflow then ends compensated", page)
    assert "Or undo step 1" not in page
    assert "steps before it" not in page
    # Resolve… says what it does to the workflow, as Replay and Compensate do (helper 105).
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("operator", "opal")
    assert "data-not-yours" not in client.get(f"/runs/workflows/{workflow_id}").get_data(as_text=True)
    run_page = " ".join(client.get(f"/runs/{step_one}").get_data(as_text=True).split())
    assert (f"close Run #{step_one} is step 1 of workflow #{workflow_id} (compensation failed). Resolving it says it "
            "was undone by hand: the workflow then ends compensated.\">Resolve…</a>") in run_page
    listing = client.get("/runs/workflows?status=compensation_failed").get_data(as_text=True)
    assert f'href="/runs/workflows/{workflow_id}"' in listing
    assert client.get("/runs/workflows?status=nonsense").status_code == 422


def page_text(client, workflow_id: int) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", client.get(f"/runs/workflows/{workflow_id}").get_data(as_text=True))
                    .split())


def stopped_at_a_step_for_a_person(saga) -> tuple[int, Run]:
    """A two-step workflow whose step 2 failed with a severity-3 error: stopped there, its run dead for a person."""
    workflow_id = saga.submit([{"handler": "demo.flaky_compensated", "params": {"fail_times": 0}},
                               {"handler": "demo.flaky_compensated",
                                "params": {"fail_times": 9, "error": "compensable", "severity": 3}}])
    assert saga.execute(workflow_id, 1) == "succeeded"
    saga.advance(workflow_id)
    assert saga.execute(workflow_id, 2) == "dead"
    assert saga.advance(workflow_id) == "compensation_failed"
    held = saga.run(workflow_id, 2)
    return workflow_id, held


def test_a_stopped_workflow_whose_letter_was_discarded_says_so_and_not_that_a_letter_waits(client, auth, saga):
    """Its note, written when the step failed, went on saying "a dead letter for a person" on the page and in the
    list after someone discarded that letter (helper 160)."""
    workflow_id, held = stopped_at_a_step_for_a_person(saga)
    [letter] = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == held.id)).scalars()
    discards.discard(letter, "the label was printed by hand", Actor("olga"), clock=saga.clock)
    auth.as_role("operator")
    said = (f"(run #{held.id}; its dead letter #{letter.id} was discarded by olga at "
            f"{saga.clock():%Y-%m-%d %H:%M} UTC); steps before it were left as they are.")
    assert said in page_text(client, workflow_id)
    assert "a dead letter for a person" not in page_text(client, workflow_id)
    listing = " ".join(unescape(client.get("/runs/workflows").get_data(as_text=True)).split())
    assert said in listing and "a dead letter for a person" not in listing


def test_a_step_left_for_a_person_stops_its_workflow_and_the_page_says_what_a_person_can_do(client, auth, saga):
    """Its error's severity 3 left the failed step for a person, its undo not run: the workflow stops there, the
    step before it left as it is, and the page names the person's three ways on."""
    workflow_id, held = stopped_at_a_step_for_a_person(saga)
    auth.as_role("operator")
    text = page_text(client, workflow_id)
    assert (f"A person takes over: step 2 failed for good and waits for a person: its error&#39;s severity 3 left it "
            f"with its undo not run (run #{held.id}, a dead letter for a person); steps before it were left as they "
            "are. compensable: flaky failure 1 of 9 Once a person has looked at it, run the undo of step 2 on its run "
            "page: the steps before it are then undone too. Or undo step 2 by hand, then mark its run resolved: the "
            "workflow then goes on undoing the steps before it.") in text
    assert "manual intervention" in text  # step 2's undo, as its run's reason reads
    assert ("The step that failed waits for a person first: once it is undone (its undo run, or by hand and its run "
            "resolved), the steps before it are undone, last first.") in text
    assert "data-step-waits" not in client.get(f"/runs/workflows/{workflow_id}").get_data(as_text=True)
    # Its Replay says what a replay does here: nothing was undone, so none of "the steps its compensation undid".
    run_page = " ".join(client.get(f"/runs/{held.id}").get_data(as_text=True).split())
    assert (f"Run #{held.id} is step 2 of workflow #{workflow_id} (compensation failed). A replay runs this step "
            "alone: the workflow stays stopped at it, the steps before it as they are. If the replay succeeds, "
            "Compensate… on its run page undoes it, and then the steps before it.") in run_page


def test_a_stopped_steps_replay_and_compensate_say_what_they_do_to_its_workflow(client, auth, saga):
    """Its own undo failed: its Replay said nothing of running the handler, not the undo. Replayed since and succeeded:
    its Compensate… said "alone" where the workflow then undid the steps before it (helper 150)."""
    workflow_id = saga.submit([{"handler": "demo.flaky_compensated", "params": {"fail_times": 0}},
                               {"handler": "demo.flaky_compensated",
                                "params": {"fail_times": 1, "error": "compensable", "undo_fail_times": 3}}])
    saga.execute(workflow_id, 1)
    saga.advance(workflow_id)
    assert saga.execute(workflow_id, 2) == "dead"  # failed, and its own undo failed three times
    assert saga.advance(workflow_id) == "compensation_failed"
    stopped = saga.run(workflow_id, 2)
    auth.as_role("operator")
    page = " ".join(client.get(f"/runs/{stopped.id}").get_data(as_text=True).split())
    assert ("Its undo failed: a replay runs the handler itself again, not its undo (Retry the undo, on its run page, "
            "does that).") in unescape(page)
    (letter,) = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == stopped.id)).scalars()
    row = unescape(" ".join(client.get("/dlq/?view=list").get_data(as_text=True).split()))
    assert "a replay runs the handler itself again, not its undo" in row
    # Its Discard took away Retry the undo, and the workflow's way on, unsaid (helper 150).
    assert (f"Discard dead letter #{letter.id}? Its run's undo can no longer be run from Rebound once it is discarded: "
            f"its workflow #{workflow_id} then goes on only once a person undoes step 2 by hand and marks its run "
            "resolved.") in row
    control.replay(letter, Actor("olga"), clock=saga.clock)
    assert saga.execute(workflow_id, 2) == "succeeded"
    page = unescape(" ".join(client.get(f"/runs/{stopped.id}").get_data(as_text=True).split()))
    assert (f"Run #{stopped.id} is step 2 of workflow #{workflow_id} (compensation failed). Its workflow stopped at "
            "step 2 for a person: once this undo works, the workflow goes on undoing the steps before it, last "
            "first.") in page


def test_a_stopped_step_with_no_undo_replayed_since_says_nothing_here_can_undo_it(client, auth, saga):
    """The page pointed at a Compensate… its run page does not have: the workflow stayed stopped with nothing to
    press (helper 150)."""
    workflow_id = saga.submit([{"handler": "demo.flaky_compensated", "params": {"fail_times": 0}},
                               {"handler": "demo.flaky",
                                "params": {"fail_times": 1, "error": "compensable", "severity": 3}}])
    saga.execute(workflow_id, 1)
    saga.advance(workflow_id)
    saga.execute(workflow_id, 2)
    assert saga.advance(workflow_id) == "compensation_failed"
    held = saga.run(workflow_id, 2)
    auth.as_role("operator")
    run_page = unescape(" ".join(client.get(f"/runs/{held.id}").get_data(as_text=True).split()))
    said = ("Its handler has no undo step: once a replay succeeds nothing here undoes it, and the workflow stays "
            "stopped (to have the steps before it undone, undo this step by hand and mark its run resolved instead).")
    assert said in run_page
    letter = DeadLetter.query.filter_by(run_id=held.id).one()
    fix_form = unescape(" ".join(client.get(f"/dlq/{letter.id}/fix").get_data(as_text=True).split()))
    assert said in fix_form  # a fix replays it too: it pointed at a Compensate… this step does not have
    control.replay(letter, Actor("olga"), clock=saga.clock)
    assert saga.execute(workflow_id, 2) == "succeeded"
    text = page_text(client, workflow_id)
    assert ("Its run was replayed since and succeeded. Its handler has no undo step, so nothing here can undo it and "
            "the workflow stays stopped: undo step 2 by hand if it must be, and the steps before it with Compensate… "
            "on their run pages.") in text
    assert "compensate step 2" not in text


def test_a_workflow_undone_under_a_step_left_for_a_person_before_the_stop_says_so(client, auth, saga):
    """A workflow undone by an earlier Rebound, which went on undoing the steps before a step its error's severity 3
    left for a person: the workflow read a green "compensated" and nothing said step 2 still waited (helper 148)."""
    workflow_id = saga.submit([{"handler": "demo.flaky_compensated", "params": {"fail_times": 0}},
                               {"handler": "demo.flaky_compensated",
                                "params": {"fail_times": 9, "error": "compensable", "severity": 3}}])
    assert saga.execute(workflow_id, 1) == "succeeded"
    saga.advance(workflow_id)
    assert saga.execute(workflow_id, 2) == "dead"
    # As that version left it: steps before undone, the failed step's run dead for a person, the workflow compensated.
    db.session.execute(Workflow.__table__.update().where(Workflow.id == workflow_id).values(
        status="compensated", current_step=0, failed_step=2, finished_at=saga.clock()))
    db.session.commit()
    auth.as_role("viewer")
    assert ("Step 2 waits for a person: its error&#39;s severity 3 left it for a person, its undo not run; the steps "
            "before it were undone. Its run page offers Run the undo, Replay or Resolve….") in page_text(client,
                                                                                                         workflow_id)
    # Its letter discarded, the run page offers no undo: neither does this line (it named one from the handler).
    (letter,) = db.session.execute(select(DeadLetter).where(DeadLetter.run_id == saga.run(workflow_id, 2).id)).scalars()
    discards.discard(letter, "the label was voided by hand at the carrier", Actor("olga"))
    assert "Its run page offers Replay or Resolve…." in page_text(client, workflow_id)


def test_cancelling_a_step_says_what_it_does_to_its_workflow(client, auth, saga):
    # The Cancel dialog said nothing of the workflow, where Replay, Compensate and Resolve each do (helper 105).
    workflow_id = saga.submit(three_steps())
    saga.execute(workflow_id, 1)
    saga.advance(workflow_id)
    second = saga.run(workflow_id, 2)
    auth.as_role("operator")
    page = " ".join(client.get(f"/runs/{second.id}").get_data(as_text=True).split())
    assert (f"Cancel run #{second.id}? It will not run again unless someone retries it. Run #{second.id} is step 2 of "
            f"workflow #{workflow_id} (running). Once it ends cancelled the workflow stops and undoes step 1.") in page


def test_the_list_finds_a_workflow_by_number_name_or_key_and_tenant(client, auth, saga):
    # It filtered by status only: "where is the saga of order 7?" meant paging through 50 at a time (helper 105).
    acme = make_tenant("acme")
    ours = saga.submit(three_steps(), key="order-7", name="ship order 7")
    other = saga.submit(three_steps(), key="refund-99", name="refund", tenant="acme")
    auth.as_role("viewer")

    def listed(**query) -> set[int]:
        response = client.get("/runs/workflows", query_string=query)
        assert response.status_code == 200
        return {int(found) for found in re.findall(r'href="/runs/workflows/(\d+)"', response.get_data(as_text=True))}

    assert listed() == {ours, other}
    assert listed(q="ORDER-7") == listed(q="ship") == listed(q=f"#{ours}") == {ours}
    assert listed(q="refund", tenant="default") == set() and listed(tenant="acme") == {other}
    assert listed(q="50%_") == set() and listed(tenant="nope") == set()  # LIKE's wildcards are plain text
    page = client.get("/runs/workflows", query_string={"q": "order", "status": "running"}).get_data(as_text=True)
    assert 'href="/runs/workflows?q=order"' in page  # "All" keeps the search; the live refresh too
    assert 'hx-get="/runs/workflows?status=running&amp;q=order"' in page
    auth.make_user("acme-viewer", "viewer", tenant=acme)
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.login("acme-viewer")
    assert client.get("/runs/workflows", query_string={"tenant": "default"}).status_code == 403
    assert listed(q="order") == set() and listed() == {other}


def test_another_tenants_workflow_is_not_found(client, auth, saga):
    workflow_id = saga.submit(three_steps())
    acme = make_tenant("acme")
    auth.make_user("ann", "viewer", tenant=acme)
    auth.login("ann")
    assert client.get(f"/runs/workflows/{workflow_id}").status_code == 404
    assert f"/runs/workflows/{workflow_id}" not in client.get("/runs/workflows").get_data(as_text=True)


def test_fixing_a_workflow_steps_dead_letter_says_the_workflow_does_not_go_on(client, auth, saga):
    workflow_id = failed_at_step_two(saga)
    letter_id = db.session.execute(select(DeadLetter.id).join(Run, Run.id == DeadLetter.run_id).where(
        Run.workflow_id == workflow_id, Run.workflow_step == 2)).scalar_one()
    db.session.rollback()
    auth.as_role("operator")
    page = client.get(f"/dlq/{letter_id}/fix").get_data(as_text=True)
    # Replayed alone, the step succeeded while its workflow still read "compensation failed · step 2 failed".
    assert f'is step 2 of\n  <a href="/runs/workflows/{workflow_id}">workflow #{workflow_id}</a>' in page
    assert "A replay runs this step alone: the workflow does not go on from it" in page
