"""Tenants: created and given quotas by admins on the page, the API and the CLI; audited; the tenant wall holds."""

import os
import pwd
import socket

import pytest
from sqlalchemy import select

from console.commands import terminal
from console.extensions import db
from console.models import AuditEntry, Tenant
from console.services.actor import Actor
from console.services.errors import Conflict, Forbidden, InvalidInput
from console.services.people import tenants
from tests.factories import Runs, bearer, make_tenant
from tests.helpers import csrf_from

ADA = Actor("ada")


def _tenant(name: str) -> Tenant:
    db.session.expire_all()
    return db.session.execute(select(Tenant).where(Tenant.name == name)).scalar_one()


def _audit(action: str) -> list[AuditEntry]:
    return db.session.execute(select(AuditEntry).where(AuditEntry.action == action)).scalars().all()


def test_create_sets_quotas_audits_and_refuses_a_taken_name(app):
    tenant = tenants.create("acme", ADA, max_running=3, max_queued="50")
    assert (tenant.name, tenant.max_running, tenant.max_queued) == ("acme", 3, 50)
    [entry] = _audit("tenant.create")
    assert entry.after == {"name": "acme", "max_running": 3, "max_queued": 50}
    with pytest.raises(Conflict, match="exists already"):
        tenants.create("acme", ADA)
    assert tenants.create("globex", ADA).max_running == 100  # the defaults where not given


@pytest.mark.parametrize(("field", "value", "message"), [
    ("max_running", 0, "max_running must be a whole number from 1 to 100000, got 0"),
    ("max_running", "ten", "max_running must be a whole number from 1 to 100000, got 'ten'"),
    ("max_queued", -5, "max_queued must be a whole number from 1 to 10000000, got -5"),
    ("max_queued", True, "max_queued must be a whole number"),
    ("max_running", 2.5, "max_running must be a whole number"),
])
def test_bad_quotas_say_what_to_send_and_write_nothing(app, field, value, message):
    with pytest.raises(InvalidInput, match=message) as refused:
        tenants.create("acme", ADA, **{field: value})
    assert refused.value.field == field and tenants.find("acme") is None
    with pytest.raises(InvalidInput, match=message):
        tenants.set_quota(tenants.find("default"), ADA, **{field: value})
    assert _tenant("default").max_running == 100 and not _audit("tenant.set_quota")


def test_bad_names_are_refused(app):
    for name in ("", "Acme", "has space", "x" * 65, 7):
        with pytest.raises(InvalidInput, match="tenant names are 1-64 lowercase"):
            tenants.create(name, ADA)
    with pytest.raises(InvalidInput, match="^name is required: tenant names are 1-64 lowercase"):  # "got NoneType"
        tenants.create(None, ADA)


def test_set_quota_audits_before_and_after(app):
    tenants.set_quota(tenants.find("default"), ADA, max_running=4)
    [entry] = _audit("tenant.set_quota")
    assert (entry.before["max_running"], entry.after["max_running"]) == (100, 4)
    assert entry.after["max_queued"] == 10_000
    with pytest.raises(InvalidInput, match="give max_running, max_queued or both"):
        tenants.set_quota(tenants.find("default"), ADA)
    # The same values again change nothing and write no row saying nothing changed (before == after).
    tenants.set_quota(tenants.find("default"), ADA, max_running=4)
    assert len(_audit("tenant.set_quota")) == 1


def test_a_scoped_person_may_neither_create_nor_raise_quotas(app):
    acme = make_tenant("acme")
    with pytest.raises(Forbidden):
        tenants.create("other", ADA, scope=acme.id)
    with pytest.raises(Forbidden):
        tenants.set_quota(acme, ADA, max_running=1000, scope=acme.id)


def test_usage_counts_running_and_queued_runs(app):
    make_tenant("acme")
    runs = Runs()
    first, _, _ = runs.submit(tenant="acme"), runs.submit(tenant="acme"), runs.submit()
    db.session.execute(db.text("UPDATE runs SET status = 'running' WHERE id = :id"), {"id": first})
    db.session.commit()
    rows = {row.tenant.name: (row.running, row.queued) for row in tenants.usage(None)}
    assert rows == {"acme": (1, 1), "default": (0, 1)}
    assert [row.tenant.name for row in tenants.usage(_tenant("acme").id)] == ["acme"]


# The API

def test_api_lists_creates_and_sets_quotas(client, auth):
    headers = bearer(auth.make_user("root", "admin"))
    created = client.post("/api/tenants", json={"name": "acme", "max_running": 2}, headers=headers)
    assert created.status_code == 201
    assert created.json == {**created.json, "name": "acme", "max_running": 2, "max_queued": 10_000, "running": 0}
    assert created.headers["Location"] == "/api/tenants/acme"  # it had none, and no GET to point at
    assert client.get(created.headers["Location"], headers=headers).json == created.json
    changed = client.put("/api/tenants/acme", json={"max_queued": 20}, headers=headers)
    assert changed.status_code == 200 and changed.json["max_queued"] == 20
    listed = client.get("/api/tenants", headers=headers).json["tenants"]
    assert [t["name"] for t in listed] == ["acme", "default"]


def test_api_answers_bad_input_with_a_4xx_that_names_the_field(client, auth):
    headers = bearer(auth.make_user("root", "admin"))
    bad = client.put("/api/tenants/default", json={"max_running": "lots"}, headers=headers)
    assert bad.status_code == 422 and bad.json["field"] == "max_running"
    assert "whole number from 1 to 100000" in bad.json["detail"]
    unknown = client.put("/api/tenants/default", json={"max_runing": 3}, headers=headers)
    assert unknown.status_code == 422 and unknown.json["field"] == "max_runing"
    assert client.post("/api/tenants", json={"name": "default"}, headers=headers).status_code == 409
    assert client.put("/api/tenants/nope", json={"max_running": 3}, headers=headers).status_code == 404
    assert client.post("/api/tenants", data="x", headers=headers).status_code == 400
    assert _tenant("default").max_running == 100


def test_api_keeps_the_tenant_wall_and_needs_admin(client, auth):
    acme, _ = make_tenant("acme"), make_tenant("globex")
    scoped = bearer(auth.make_user("ada", "admin", tenant=acme), tenant=acme)
    assert [t["name"] for t in client.get("/api/tenants", headers=scoped).json["tenants"]] == ["acme"]
    assert client.put("/api/tenants/globex", json={"max_running": 1}, headers=scoped).status_code == 404
    assert client.get("/api/tenants/globex", headers=scoped).status_code == 404
    assert client.get("/api/tenants/acme", headers=scoped).json["name"] == "acme"
    assert client.put("/api/tenants/acme", json={"max_running": 999}, headers=scoped).status_code == 403
    assert client.post("/api/tenants", json={"name": "mine"}, headers=scoped).status_code == 403
    operator = bearer(auth.make_user("olga", "operator"))
    assert client.get("/api/tenants", headers=operator).status_code == 403


# The page

def test_the_page_creates_a_tenant_and_sets_its_quota(client, auth):
    auth.as_role("admin")
    page = client.get("/admin/tenants").get_data(as_text=True)
    created = client.post("/admin/tenants", data={"csrf_token": csrf_from(page), "name": "acme",
                                                  "max_running": "2", "max_queued": ""})
    assert created.status_code == 303 and created.location.endswith("/admin/tenants")
    assert (_tenant("acme").max_running, _tenant("acme").max_queued) == (2, 10_000)
    acme = _tenant("acme")
    saved = client.post("/admin/tenants/acme", data={"csrf_token": auth.csrf("/admin/tenants"),
                                                     f"q-{acme.id}-max_running": "1",
                                                     f"q-{acme.id}-max_queued": "30"})
    assert saved.status_code == 303 and _tenant("acme").max_queued == 30
    listed = client.get("/admin/tenants").get_data(as_text=True)
    assert "Saved acme: at most 1 running and 30 queued." in listed
    again = client.post("/admin/tenants/acme", data={"csrf_token": auth.csrf("/admin/tenants"),
                                                      f"q-{acme.id}-max_running": "1", f"q-{acme.id}-max_queued": "30"})
    assert again.status_code == 303
    assert "No change to acme: it already runs at most 1 and queues 30." in client.get("/admin/tenants").get_data(
        as_text=True)


def test_the_page_shows_a_bad_quota_beside_its_field(client, auth):
    auth.as_role("admin")
    refused = client.post("/admin/tenants", data={"csrf_token": auth.csrf("/admin/tenants"), "name": "acme",
                                                  "max_running": "0"})
    assert refused.status_code == 422
    assert "max_running must be a whole number from 1 to 100000, got &#39;0&#39;" in refused.get_data(as_text=True)
    assert tenants.find("acme") is None


def test_a_scoped_admin_sees_only_their_tenant_without_quota_forms(client, auth):
    acme, _ = make_tenant("acme"), make_tenant("globex")
    auth.make_user("ada", "admin", tenant=acme)
    assert auth.login("ada").status_code == 302
    page = client.get("/admin/tenants").get_data(as_text=True)
    assert 'id="tenant-acme"' in page and "globex" not in page and "Create tenant" not in page
    response = client.post("/admin/tenants/acme", data={"csrf_token": auth.csrf("/admin/tenants"),
                                                        f"q-{acme.id}-max_running": "500"})
    assert response.status_code == 403 and _tenant("acme").max_running == 100


def test_operators_cannot_open_the_page(client, auth):
    auth.as_role("operator")
    assert client.get("/admin/tenants").status_code == 403


# The CLI

def test_cli_creates_lists_and_sets_quotas(app):
    runner = app.test_cli_runner()
    created = runner.invoke(args=["tenants", "create", "acme", "--max-running", "3"])
    assert created.exit_code == 0 and "Created tenant acme: max_running 3" in created.output
    assert runner.invoke(args=["tenants", "set-quota", "acme", "--max-queued", "40"]).exit_code == 0
    listed = runner.invoke(args=["tenants", "list"]).output
    assert "acme" in listed and "40" in listed
    bad = runner.invoke(args=["tenants", "set-quota", "acme", "--max-running", "-1"])
    assert bad.exit_code == 1 and "--max-running must be a whole number from 1 to 100000, got '-1'" in bad.output
    assert _tenant("acme").max_running == 3
    # The terminal's account stands where the web's address does: a CLI change names the hand that typed it.
    assert [(e.actor, e.remote_addr) for e in _audit("tenant.set_quota")] == [("cli", terminal.account())]


def test_a_cli_change_names_the_os_account_and_who_ran_sudo(app, monkeypatch):
    me = pwd.getpwuid(os.getuid()).pw_name
    monkeypatch.setenv("USER", "someone-else")  # $USER is anyone's to set: the real uid names the account
    monkeypatch.delenv("SUDO_USER", raising=False)
    assert terminal.account() == f"terminal {me}@{socket.gethostname()}"[:64]
    monkeypatch.setenv("SUDO_USER", "alice")
    runner = app.test_cli_runner()
    assert runner.invoke(args=["tenants", "create", "globex"]).exit_code == 0
    [entry] = _audit("tenant.create")
    assert entry.remote_addr == f"terminal alice as {me}@{socket.gethostname()}"[:64]
