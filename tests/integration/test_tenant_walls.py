"""The tenant wall holds for every role, admins included; what all tenants share changes only by unscoped people."""

import html
import re

import pytest
from sqlalchemy import select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import ApiToken
from console.services.actor import Actor
from console.services.delivery import outbox
from console.services.dlq.filters import Filters
from console.services.dlq.groups import entries
from console.services.errors import Forbidden, NotFound
from console.services.people import tokens as tokens_service
from console.services.people import users
from tests.factories import bearer, make_tenant


@pytest.fixture
def acme_admin(client, auth):
    """Log in an admin limited to tenant acme; globex exists too, with its own people."""
    acme, globex = make_tenant("acme"), make_tenant("globex")
    admin = auth.make_user("ada", "admin", tenant=acme)
    users.create("gus", "operator", "a-fine-long-passphrase", Actor("test"), tenant=globex)
    users.create("root", "admin", "a-fine-long-passphrase", Actor("test"))
    assert auth.login("ada").status_code == 302
    return admin, acme, globex


def post(client, auth, path: str, data: dict, page: str = "/admin/users"):
    return client.post(path, data={"csrf_token": auth.csrf(page), **data})


def test_a_scoped_admin_sees_and_manages_only_their_tenants_people(client, auth, acme_admin):
    _, acme, globex = acme_admin
    listed = client.get("/admin/users").get_data(as_text=True)
    assert "ada" in listed and "gus" not in listed and "root" not in listed
    gus, root = users.find("gus"), users.find("root")
    for target in (gus, root):
        response = post(client, auth, f"/admin/users/{target.id}", {f"u{target.id}-role": "viewer",
                                                                      f"u{target.id}-active": "0"})
        assert response.status_code == 404
    db.session.expire_all()
    assert (users.find("gus").role, users.find("root").active) == ("operator", True)


def test_a_scoped_admin_cannot_create_an_unscoped_or_other_tenants_user(client, auth, acme_admin):
    refused = post(client, auth, "/admin/users", {"username": "wide", "role": "admin", "tenant": "globex",
                                                  "password": "a-fine-long-passphrase"})
    assert refused.status_code == 422 and users.find("wide") is None  # another tenant is not even offered
    for name, tenant in (("narrow", "acme"), ("unsaid", "")):  # no tenant given means the admin's own
        created = post(client, auth, "/admin/users", {"username": name, "role": "admin", "tenant": tenant,
                                                      "password": "a-fine-long-passphrase"})
        assert created.status_code == 302 and users.find(name).tenant.name == "acme"
    with pytest.raises(Forbidden):  # the service holds the wall whatever the page offers
        users.create("wider", "admin", "a-fine-long-passphrase", Actor("ada"), tenant=acme_admin[2],
                     scope=acme_admin[1].id)


def test_a_scoped_admin_mints_tokens_only_for_their_tenants_people_and_only_scoped(client, auth, acme_admin):
    admin, acme, globex = acme_admin
    root = users.find("root")
    page = client.get("/admin/tokens").get_data(as_text=True)
    options = re.findall(r"<option [^>]*>([^<]*)</option>", page)
    assert not [o for o in options if o.split(" ")[0] in ("root", "gus") or o == "all tenants"], options
    refused = post(client, auth, "/admin/tokens", {"user": str(root.id), "name": "steal", "tenant": "acme"},
                   page="/admin/tokens")
    assert refused.status_code == 422  # root is not among the people offered
    with pytest.raises(NotFound):  # and the service holds the wall whatever the page offers
        tokens_service.issue(root, Actor("ada"), tenant=acme, scope=acme.id)
    minted = post(client, auth, "/admin/tokens", {"user": str(admin.id), "name": "ci", "tenant": "acme"},
                  page="/admin/tokens")
    assert minted.status_code == 201
    tokens = db.session.execute(select(ApiToken)).scalars().all()
    assert [(t.user.username, t.tenant.name) for t in tokens] == [("ada", "acme")]


@pytest.mark.parametrize("method, path, body", [
    ("put", "/internal/policies/default", {"max_attempts": 9}),
    ("put", "/internal/alert-rules/dlq_length", {"threshold": 5}),
])
def test_shared_objects_change_only_by_unscoped_tokens(client, auth, method, path, body):
    acme = make_tenant("acme")
    scoped = bearer(auth.make_user("svc-acme", "admin", tenant=acme), tenant=acme)
    response = getattr(client, method)(path, json=body, headers=scoped)
    assert response.status_code == 403 and "shared by every tenant" in response.json["detail"]
    unscoped = bearer(auth.make_user("svc", "admin"))
    assert getattr(client, method)(path, json=body, headers=unscoped).status_code == 200


def test_a_scoped_operator_cannot_edit_a_policy_or_reset_a_breaker_on_the_pages(client, auth):
    acme = make_tenant("acme")
    auth.make_user("olga", "operator", tenant=acme)
    auth.login("olga")
    token = auth.csrf("/policies/")
    assert client.post("/policies/default", data={"csrf_token": token}).status_code == 403
    assert client.post("/breakers/python:demo.flaky/reset", data={"csrf_token": token}).status_code == 403


def test_a_dlq_filter_naming_another_tenant_is_refused_not_dropped(app):
    acme = make_tenant("acme")
    make_tenant("globex")
    with pytest.raises(Forbidden, match="only tenant acme"):
        entries(Filters(tenant="globex"), acme.id)
    assert entries(Filters(tenant="acme"), acme.id).entries == []
    assert entries(Filters(tenant="globex"), None).entries == []  # an unscoped person may filter by any tenant


def test_a_scoped_admin_neither_sees_nor_resends_what_every_tenant_shares(client, auth, acme_admin):
    """Alert rules' figures and the channels' deliveries are every tenant's: 403, no tab, no resend."""
    _, _, globex = acme_admin
    message = outbox.add("workorder", "globex-wo-1", {"work_order_id": 1}, utcnow(), tenant_id=globex.id)
    db.session.commit()
    for path, why in (("/admin/alert-rules", "Alert rules show every tenant's figures"),
                      ("/admin/channels", "Alert channels show every tenant's deliveries"),
                      ("/audit/verify", "The hash chain holds every tenant's audit rows, and its check counts them")):
        refused = client.get(path)
        assert refused.status_code == 403, path
        said = html.unescape(refused.get_data(as_text=True))
        assert f"{why}; only a person not limited to a tenant may open it" in said, path
    resent = post(client, auth, f"/admin/channels/messages/{message.id}/redeliver", {}, page="/admin/users")
    assert resent.status_code == 403
    tabs = client.get("/admin/settings").get_data(as_text=True)
    assert "/admin/alert-rules" not in tabs and "/admin/channels" not in tabs
    # Settings hold for everyone: shown, with no Save that could only answer 403.
    assert "only an admin not limited to a tenant changes them" in tabs and "update_setting" not in tabs
    assert 'action="/admin/settings/' not in tabs
    assert "Verify hash chain" not in client.get("/audit/").get_data(as_text=True)
