"""No console page and no API GET shows a person limited to tenant acme anything of tenant globex, whatever their role.

Both tenants get the same kinds of rows (a task, runs succeeded and dead, dead letters and their work orders and
deliveries, a params fix waiting, a workflow, a runbook's dry-run, a reservation, a bulk replay, a person, a token,
audit rows), each in words only that tenant uses. Every GET route of the url_map is asked: the bare ones (and with
filters naming globex's tenant, task, error group and bulk replay), the ones taking an id with acme's ids, and with
globex's ids, which must be 404 or 403. Words are not all a leak can be (a count is a number), so each answer is
also compared with the same answer before globex had any rows: it must not have changed.
"""

import re
from datetime import timedelta

import pytest
from flask import url_for

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import Role, WorkOrder
from console.services.actor import Actor
from console.services.delivery import outbox
from console.services.dlq import bulk
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tokens, users
from console.services.recovery import params_fix
from console.services.recovery.workflows.submit import submit as submit_workflow
from console.services.reports import rollup
from console.services.scheduling import quota_classes, reservations, tasks, templates
from console.web.reports.exports import TABLES
from tests.factories import BROKEN, LENIENT, Runs, bearer, make_tenant, run_now, three_steps
from tests.helpers import PASSWORD

ARRANGE = Actor("arrange")
ROLES = [Role.VIEWER, Role.OPERATOR, Role.APPROVER, Role.MANAGER, Role.ADMIN]
API_PREFIXES = ("/api/", "/worker/", "/internal/", "/ops/")
# Each tenant's words, used nowhere else: the task and workflow names carry no tenant name, so a page that shows
# another tenant's task without saying whose it is is caught too.
WORDS = {
    "acme": {"task": "orbit-invoice-pull", "workflow": "ship crate nebula", "code": "acme_only_code",
             "message": "acme-secret ledger 17 is closed", "person": "acme-olga"},
    "globex": {"task": "zephyr-ledger-sync", "workflow": "ship crate quasar", "code": "globex_only_code",
               "message": "globex-secret ledger 42 is closed", "person": "globex-gus"},
}
GLOBEX = ("globex", "globex-secret", "globex_only_code", "zephyr-ledger-sync", "ship crate quasar", "globex-gus")
# GET routes left out, and why.
SKIPPED = {
    "static": "the app's own files, no rows",
    "plotly_css": "a vendored stylesheet, no rows",
    "plotly_js": "a vendored script, no rows",
    "auth.login": "the login form, before anyone is known",
    "tasks.cron_preview": "htmx fragment previewing the cron expression it is sent; reads no rows",
    # Open to anyone by design (an exporter; REBOUND_METRICS_TOKEN can close it), so it answers no person: it does
    # name every tenant, with its running runs and open dead letters.
    "metrics.scrape": "public Prometheus exposition, behind no person's login or token",
    # Each ask writes its own audit row (an export is on the record), so no two asks read alike: its tenant wall is
    # tests/integration/test_audit.py's.
    "audit.export": "the audit log's download, audited itself",
}
# Routes taking a tenant's own object, and its argument.
WITH_ID = {
    "tasks.show": lambda d: {"task_id": d["task"]},
    "tasks.edit": lambda d: {"task_id": d["task"]},
    "runs.show": lambda d: {"run_id": d["dead_run"]},
    "runs.workflow": lambda d: {"workflow_id": d["workflow"]},
    "dlq.letter": lambda d: {"dead_letter_id": d["letter"]},
    "dlq.fix_form": lambda d: {"dead_letter_id": d["letter"]},
    "dlq.replays_of": lambda d: {"dead_letter_id": d["letter"]},
    "dlq.group_entries": lambda d: {"fingerprint": d["fingerprint"]},
    "dlq.bulk_progress": lambda d: {"op_id": d["op"]},
    "workorders.show": lambda d: {"order_id": d["work_order"]},
    "approvals.show": lambda d: {"approval_id": d["approval"]},
    "runbooks.execution": lambda d: {"execution_id": d["execution"]},
    "approvals_api.get_approval": lambda d: {"approval_id": d["approval"]},
    "dead_letters_api.get_dead_letter": lambda d: {"letter_id": d["letter"]},
    "dead_letters_api.get_operation": lambda d: {"op_id": d["op"]},
    "runbooks_api.get_execution": lambda d: {"execution_id": d["execution"]},
    "work_orders_api.get_work_order": lambda d: {"order_id": d["work_order"]},
    "workflows_api.get_workflow": lambda d: {"workflow_id": d["workflow"]},
    "tasks_api.get_task": lambda d: {"task_id": d["task"]},
    "tasks_api.task_runs": lambda d: {"task_id": d["task"]},
    "worker_api.get_task": lambda d: {"run_id": d["dead_run"]},
    "tenants_api.get_tenant": lambda d: {"name": d["tenant"].name},
    "capacity_api.get_reservation": lambda d: {"reservation_id": d["reservation"]},
}
# Routes taking what every tenant shares (a policy, a template, a quota class, a runbook, a report's table).
SHARED = {
    "policies.edit": [{"name": "default"}],
    "conflict_templates.edit": [{"name": "ledger-lock"}],
    "runbooks.show": [{"name": "replay_dead_letters"}],
    "reports.export": [{"table": table, "period": "7d"} for table in TABLES],
    "internal_api.get_policy": [{"name": "default"}],
    "quota_classes_api.get_class": [{"name": "heavy-etl"}],
    "templates_api.get_template": [{"name": "ledger-lock"}],
}
# A fingerprint is a digest of an error, not a row: globex's answers acme's people with an empty group (or none).
NOT_A_ROW = "/dlq/groups/"
# These fragments answer only htmx (a plain request is redirected to the DLQ list, walked on its own).
HTMX_ONLY = ("/dlq/groups/", "/dlq/bulk/")
# What changes between two asks of one page with the same rows: signed tokens and one-time keys, moments and how
# long ago they were, a pending run's growing wait.
VOLATILE = [(re.compile(r"[A-Za-z0-9_.-]{20,}"), "~"),
            (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(\+00:00|Z)?"), "<moment>"),
            (re.compile(r"\b\d+(\.\d+)?\s*(ms|s|min|h|d)\b( ago)?"), "<duration>"),
            (re.compile(r"\b\d+\.\d+\b"), "<number>")]


def arrange_tenant(name: str, clock) -> dict:
    """Give a tenant one of each kind of row, in its own words; return the tenant and the ids a route takes."""
    words = WORDS[name]
    tenant = make_tenant(name)
    person = users.create(words["person"], "operator", PASSWORD, ARRANGE, tenant=tenant)[0]
    actor = Actor(person.username, person.id)
    tokens.issue(person, ARRANGE, name=f"{words['task']} deploys")
    task = tasks.register(tenant, {"name": words["task"], "handler": "demo.flaky", "cron": "0 4 * * *",
                                   "template": "ledger-lock"}, ARRANGE)
    ok, _ = submit(tenant, ARRANGE, task=task, handler=None, params={"fail_times": 0}, policy=LENIENT)
    assert execute(ok.id, 0, clock=clock) == "succeeded"
    broken = {**BROKEN, "code": words["code"], "message": words["message"]}
    dead, _ = submit(tenant, ARRANGE, task=task, handler=None, params=broken, policy=LENIENT)
    spare, _ = submit(tenant, ARRANGE, handler="demo.flaky", params=broken, policy=LENIENT)
    assert (execute(dead.id, 0, clock=clock), execute(spare.id, 0, clock=clock)) == ("dead", "dead")
    letter, spare_letter = Runs().dead_letters(dead.id)[0], Runs().dead_letters(spare.id)[0]
    approval = params_fix.request_fix(letter.id, {"fail_times": 0}, f"{words['message']}: replay", actor)
    workflow, _ = submit_workflow(tenant, actor, name=words["workflow"], steps=three_steps(),
                                  idempotency_key=f"{name}-order")
    execution = run_now("replay_dead_letters", {"code": words["code"]}, ARRANGE, clock=clock, dry_run=True,
                        tenant=name)
    reservation = reservations.create(name, ARRANGE, running_slots=2, queued_runs=5, starts_at=utcnow(),
                                      ends_at=utcnow() + timedelta(hours=6),
                                      reason=f"{words['message']}: month-end close")
    op = bulk.start_replay(actor, tenant.id, ids=[spare_letter.id])  # queued only: no worker runs here
    order = db.session.get(WorkOrder, letter.work_order_id)
    outbox.add("workorder", f"{name}-wo-{order.id}", {"work_order_id": order.id, "title": words["message"]},
               utcnow(), tenant_id=tenant.id)
    rollup.rebuild()  # the reports read the rollup, not the runs
    db.session.commit()
    return {"tenant": tenant, "task": task.id, "dead_run": dead.id, "letter": letter.id,
            "fingerprint": letter.fingerprint, "approval": approval.id, "workflow": workflow.id,
            "execution": execution.id, "op": op.op_id, "work_order": order.id, "reservation": reservation["id"]}


@pytest.fixture
def earlier():
    """The clock the seeded runs ran on: two hours ago, so they are over before any page is asked, and out of the
    Overview's per-minute chart of the last hour, which moves with each minute (a page asked either side of a minute
    read as changed by globex's rows). Its per-hour chart holds them."""
    return FrozenClock(utcnow() - timedelta(hours=2))


@pytest.fixture
def acme(app, earlier):
    """What every tenant shares (a conflict template, a quota class), and acme's rows; globex has none yet."""
    templates.save("ledger-lock", {"mutex_key": "ledger", "concurrency_policy": "forbid"}, ARRANGE,
                   description="ledger jobs never overlap")
    quota_classes.create("heavy-etl", 2, ARRANGE, description="nightly ETL: two at a time across tenants")
    return arrange_tenant("acme", earlier)


def get_routes(app, api: bool) -> tuple[list[str], list[str]]:
    """Return (the bare GET endpoints, those taking arguments) of the console (api False) or of the API."""
    bare, with_args = [], []
    for rule in app.url_map.iter_rules():
        if "GET" not in rule.methods or rule.endpoint in SKIPPED or rule.rule.startswith(API_PREFIXES) != api:
            continue
        (with_args if rule.arguments else bare).append(rule.endpoint)
    return sorted(set(bare)), sorted(set(with_args))


def own_paths(app, ids: dict, api: bool) -> list[str]:
    """Every bare GET path, each path taking an id with `ids`, and each path taking a shared object's name."""
    bare, with_args = get_routes(app, api)
    unknown = set(with_args) - set(WITH_ID) - set(SHARED)
    assert not unknown, f"say how to reach these routes in WITH_ID or SHARED (or SKIPPED, why): {sorted(unknown)}"
    with app.test_request_context():
        return ([url_for(endpoint) for endpoint in bare]
                + [url_for(endpoint, **WITH_ID[endpoint](ids)) for endpoint in with_args if endpoint in WITH_ID]
                + [url_for(endpoint, **args) for endpoint in with_args if endpoint in SHARED
                   for args in SHARED[endpoint]])


def filtered_paths(app, globex: dict, api: bool) -> list[tuple[str, str | None]]:
    """Each bare GET path with a filter naming globex's tenant, task, error group or bulk replay; and the word the
    answer may say back (what was asked for is no leak)."""
    bare, _ = get_routes(app, api)
    queries = [("?tenant=globex", "globex"), (f"?task={globex['task']}", None),
               (f"?view=list&group={globex['fingerprint']}&op={globex['op']}", None)]
    with app.test_request_context():
        return [(url_for(endpoint) + query, echo) for endpoint in bare for query, echo in queries]


def ask(client, path: str, headers: dict) -> tuple[int, str, str]:
    """GET a path as the person or token, following redirects; return the status, where it ended, the text."""
    if path.startswith(HTMX_ONLY):
        headers = {**headers, "HX-Request": "true"}
    response = client.get(path, headers=headers, follow_redirects=True)
    return response.status_code, response.request.path, response.get_data(as_text=True)


def steady(text: str) -> str:
    """The text with what changes between two asks of the same rows (VOLATILE) stood in for."""
    for pattern, stand_in in VOLATILE:
        text = pattern.sub(stand_in, text)
    return text


def changed_lines(before: str, after: str) -> list[str]:
    """The lines of `after` not in `before`, shortened: what another tenant's rows added to an answer."""
    seen = set(steady(before).splitlines())
    return [line.strip()[:300] for line in steady(after).splitlines() if line not in seen]


def walk_problems(client, app, acme: dict, clock, headers: dict, api: bool) -> list[str]:
    """Walk acme's paths before and after globex has rows, then globex's filters; return what went wrong."""
    paths = own_paths(app, acme, api)
    before = {path: ask(client, path, headers) for path in paths}
    globex = arrange_tenant("globex", clock)
    problems = []
    for path in paths:
        status, ended, text = ask(client, path, headers)
        if status not in {200, 403, 404} or ended == "/login":
            problems.append(f"{path}: {status} at {ended}")
        # A word the address itself names is the caller's own input said back ("no tenant named 'globex'", the same
        # whether or not it exists), not a row shown.
        if found := [word for word in GLOBEX if word in text and word not in path]:
            problems.append(f"{path} ({status}) shows {found}")
        elif added := changed_lines(before[path][2], text):
            problems.append(f"{path} ({status}) changed when globex got rows: {added}")
    for path, echo in filtered_paths(app, globex, api):
        status, ended, text = ask(client, path, headers)
        if status not in {200, 400, 403, 404, 422} or ended == "/login":
            problems.append(f"{path}: {status} at {ended}")
        if found := [word for word in GLOBEX if word in text and word != echo]:
            problems.append(f"{path} ({status}) shows {found}")
    return problems


def acme_person(auth, acme: dict, role: str):
    return auth.make_user(f"acme-{role}", role, tenant=acme["tenant"])


@pytest.mark.parametrize("role", ROLES)
def test_no_console_page_shows_a_tenant_limited_person_another_tenants_rows(client, auth, app, acme, earlier, role):
    acme_person(auth, acme, role)
    assert auth.login(f"acme-{role}").status_code == 302
    # Acme's own rows are on the pages (had the seed or the login failed, no page would show globex's either).
    assert "acme_only_code" in client.get("/dlq/?view=list").get_data(as_text=True)
    problems = walk_problems(client, app, acme, earlier, {}, api=False)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ROLES)
def test_no_api_answer_shows_a_tenant_limited_token_another_tenants_rows(client, auth, app, acme, earlier, role):
    headers = bearer(acme_person(auth, acme, role))  # a person limited to acme: the token is too
    assert "acme_only_code" in client.get("/api/dead-letters", headers=headers).get_data(as_text=True)
    problems = walk_problems(client, app, acme, earlier, headers, api=True)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ROLES)
def test_another_tenants_ids_are_not_found_for_a_tenant_limited_person(client, auth, app, acme, earlier, role):
    """Every route taking an id answers 404 or 403 for globex's ids, to the acme person's session and token."""
    headers = bearer(acme_person(auth, acme, role))
    assert auth.login(f"acme-{role}").status_code == 302
    globex = arrange_tenant("globex", earlier)
    with app.test_request_context():
        paths = [url_for(endpoint, **WITH_ID[endpoint](globex)) for endpoint in WITH_ID]
    problems = []
    for path in paths:
        status, ended, text = ask(client, path, headers if path.startswith(API_PREFIXES) else {})
        if status not in ({200, 403, 404} if path.startswith(NOT_A_ROW) else {403, 404}) or ended == "/login":
            problems.append(f"{path}: {status} at {ended}")
        # A word the address itself names is the caller's own input said back ("no tenant named 'globex'", the same
        # whether or not it exists), not a row shown.
        if found := [word for word in GLOBEX if word in text and word not in path]:
            problems.append(f"{path} ({status}) shows {found}")
    assert not problems, "\n".join(problems)
