"""Submit a run from the console: the API's checks, CSRF, the operate permission, the tenant wall, an audit row;
and a task with neither cron nor event, run by hand only."""

import re

from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry, Run, Task, Tenant
from console.services.engine.execute import execute


def _form(client, auth, **fields):
    page = client.get("/runs/new").get_data(as_text=True)
    key = re.search(r'name="form_key" type="hidden" value="([0-9a-f]+)"', page).group(1)
    data = {"csrf_token": auth.csrf("/runs/new"), "form_key": key, "tenant": "default", "handler": "python:demo.noop",
            "params": "", "policy": "", "idempotency_key": "", **fields}
    return data


def _runs():
    db.session.expire_all()
    return db.session.execute(select(Run).order_by(Run.id)).scalars().all()


def test_an_operator_submits_a_run_and_it_is_audited(client, auth, clock):
    auth.as_role("operator", "olga")
    page = client.get("/runs/new").get_data(as_text=True)
    assert '<option value="python:demo.noop">' in page and '<option value="python:demo.flaky">' in page
    assert "Fail the first <code>fail_times</code> executions" in page and "`fail_times`" not in page
    # Which handlers a person can later undo (Compensate…): their descriptions alone read the same.
    assert '<code>python:demo.flaky_compensated</code> <span class="badge compensated"' in page
    assert '<code>python:demo.flaky</code> <span class="badge' not in page
    # The commands file's entries too, with their words and their undo (config/commands.yaml's echo-params).
    assert '<option value="command:echo-params">Print the params back (a harmless demo).</option>' in page
    assert '<code>command:echo-params</code> <span class="badge compensated"' in page
    assert 'href="/runs/new">Submit a run</a>' in client.get("/runs").get_data(as_text=True)
    data = _form(client, auth, handler="python:demo.flaky", params='{"fail_times": 0, "order": 7}',
                 idempotency_key="invoice-7")
    response = client.post("/runs/new", data=data)
    assert response.status_code == 303
    [run] = _runs()
    assert response.headers["Location"].endswith(f"/runs/{run.id}")
    assert (run.handler, run.params, run.idempotency_key, run.source) == (
        "python:demo.flaky", {"fail_times": 0, "order": 7}, "invoice-7", "console")
    [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "run.submit")).scalars().all()
    assert entry.actor == "olga" and entry.target_id == str(run.id) and entry.after["idempotency_key"] == "invoice-7"
    assert execute(run.id, 0, clock=clock) == "succeeded"
    shown = client.get(response.headers["Location"]).get_data(as_text=True)
    assert f"Submitted run #{run.id}; this page follows it." in shown and "it is pending" not in shown
    # The same key again is the same run: nothing new, no second audit row.
    again = client.post("/runs/new", data=_form(client, auth, handler="python:demo.flaky", idempotency_key="invoice-7"))
    assert again.status_code == 303 and len(_runs()) == 1
    assert "already names run" in client.get(again.headers["Location"]).get_data(as_text=True)
    assert len(db.session.execute(select(AuditEntry).where(AuditEntry.action == "run.submit")).all()) == 1
    # The key sent for other work (another handler) is refused, saying which run it names.
    other = client.post("/runs/new", data=_form(client, auth, idempotency_key="invoice-7"))
    assert other.status_code == 409 and f"already names run {run.id}, of handler python:demo.flaky" in (
        other.get_data(as_text=True)) and len(_runs()) == 1


def test_a_double_click_submits_once(client, auth):
    auth.as_role("operator")
    data = _form(client, auth)
    assert client.post("/runs/new", data=data).status_code == 303
    assert client.post("/runs/new", data=data).status_code == 303
    assert len(_runs()) == 1 and _runs()[0].idempotency_key == f"console:{data['form_key']}"


def test_a_form_key_no_form_was_shown_with_is_replaced_not_refused_as_the_idempotency_key(client, auth):
    """A tampered form_key came back as "idempotency_key must be…", under a box the person had left empty
    (helper 155)."""
    auth.as_role("operator")
    data = _form(client, auth, form_key="x\ty" * 80)
    assert client.post("/runs/new", data=data).status_code == 303
    [run] = _runs()
    assert re.fullmatch(r"console:[0-9a-f]{32}", run.idempotency_key)


def test_bad_input_is_a_4xx_under_its_field_and_nothing_is_written(client, auth):
    auth.as_role("operator")
    for fields, field, message in [
        ({"params": "{order: 7}"}, "params", "params is not valid JSON"),
        ({"params": "[1]"}, "params", "params must be a JSON object"),
        ({"params": '{"order": 7, "order": 8}'}, "params", "params: the key &#39;order&#39; is given twice"),
        ({"handler": "python:demo.nope"}, "handler", "no Python handler named"),
        ({"handler": ""}, "handler", "handler"),
        ({"policy": "no-such-policy"}, "policy", "no retry policy named"),
    ]:
        response = client.post("/runs/new", data=_form(client, auth, **fields))
        assert response.status_code in (404, 409, 422), (fields, response.status_code)
        errors = re.findall(rf'id="{field}-error">([^<]*)<', response.get_data(as_text=True))
        assert errors and message in errors[0], (fields, response.get_data(as_text=True)[-3000:])
    assert _runs() == []
    assert client.post("/runs/new", data={**_form(client, auth), "csrf_token": "forged"}).status_code in (400, 422)
    assert _runs() == []


def test_viewers_may_not_submit(client, auth):
    auth.as_role("viewer", "vic")
    assert client.get("/runs/new").status_code == 403
    assert 'href="/runs/new"' not in client.get("/runs").get_data(as_text=True)


def test_a_tenant_limited_operator_stays_in_its_tenant(client, auth):
    acme = Tenant(name="acme")
    db.session.add(acme)
    db.session.commit()
    auth.make_user("tia", "operator", tenant=acme)
    auth.login("tia")
    page = client.get("/runs/new").get_data(as_text=True)
    assert re.search(r'<option (selected )?value="acme"( selected)?>acme</option>', page)
    assert 'value="default">default</option>' not in page
    response = client.post("/runs/new", data=_form(client, auth, tenant="default"))
    assert response.status_code == 403 and _runs() == []
    assert client.post("/runs/new", data=_form(client, auth, tenant="acme")).status_code == 303
    assert [run.tenant_id for run in _runs()] == [acme.id]


def test_a_task_with_neither_cron_nor_event_is_saved_and_runs_by_hand(client, auth):
    auth.as_role("operator", "olga")
    page = client.get("/tasks/new").get_data(as_text=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)
    response = client.post("/tasks/new", data={"csrf_token": token, "name": "rebuild search index",
                                               "tenant": "default", "handler": "demo.noop", "cron": "", "event": "",
                                               "timezone": "UTC", "concurrency_policy": "allow", "jitter_s": "0",
                                               "debounce_s": "0", "misfire_grace_s": "300"})
    assert response.status_code == 303, response.get_data(as_text=True)[-2000:]
    task = db.session.execute(select(Task)).scalar_one()
    assert (task.cron, task.event) == (None, None)
    shown = client.get(f"/tasks/{task.id}").get_data(as_text=True)
    assert "runs only when someone runs it" in shown
    assert "by hand only" in client.get("/tasks").get_data(as_text=True)


def test_the_form_opens_while_the_commands_file_cannot_be_read(client, auth, app, tmp_path):
    broken = tmp_path / "commands.yaml"
    broken.write_text("echo: [unclosed\n")
    app.config["COMMANDS_FILE"] = str(broken)
    auth.as_role("operator")
    page = client.get("/runs/new")
    assert page.status_code == 200 and 'value="python:demo.noop"' in page.get_data(as_text=True)
    assert "command:" not in page.get_data(as_text=True).split('id="handler-names"')[1]
