"""Admin: create people, change roles, issue and revoke tokens, all audited."""

import re
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from console.domain.clock import utcnow
from console.extensions import db
from console.models import ApiToken, AuditEntry, User
from console.services.actor import Actor
from console.services.errors import Conflict, InvalidInput
from console.services.people import tokens, users
from tests.factories import make_tenant


def last_audit():
    return db.session.query(AuditEntry).order_by(AuditEntry.seq.desc()).first()


def test_admin_creates_a_user_with_a_generated_password_shown_once(client, auth):
    auth.as_role("admin", "root")
    response = client.post("/admin/users", data={"username": "nina", "role": "operator", "tenant": "",
                                                  "password": "", "csrf_token": auth.csrf("/admin/users")})
    # On the answer itself, never in a flash, which would carry it in the session cookie.
    assert response.status_code == 200
    assert "Created nina (operator)." in response.text
    password = re.search(r'<p class="secret" id="new-password">(\S+)</p>', response.text).group(1)
    assert password not in client.get("/admin/users").text
    cookie = client.get_cookie(client.application.config["SESSION_COOKIE_NAME"])
    kept = client.application.session_interface.get_signing_serializer(client.application).loads(cookie.value)
    assert password not in repr(kept)
    client.post("/logout", data={"csrf_token": auth.csrf()})
    assert auth.login("nina", password).status_code == 302
    entry = db.session.query(AuditEntry).filter_by(action="user.create", actor="root").one()
    assert entry.actor == "root" and entry.after["role"] == "operator"


def test_a_tenant_admins_new_person_is_said_to_be_limited_to_the_tenant(client, auth):
    acme = make_tenant("acme")
    auth.make_user("tad", "admin", tenant=acme)
    auth.login("tad")
    answer = client.post("/admin/users", data={"username": "wide1", "role": "viewer", "tenant": "", "password": "",
                                               "csrf_token": auth.csrf("/admin/users")})
    assert "Created wide1 (viewer, tenant acme only)." in answer.text


def test_invalid_new_user_gets_422_naming_the_field(client, auth):
    auth.as_role("admin", "root")
    response = client.post("/admin/users", data={"username": "x", "role": "operator", "password": "short",
                                                  "csrf_token": auth.csrf("/admin/users")})
    assert response.status_code == 422
    body = response.get_data(as_text=True)
    assert "2-64 letters" in body and "at least 10 characters" in body
    assert db.session.query(User).count() == 1


def test_a_username_ending_in_a_newline_is_refused(app):
    with pytest.raises(InvalidInput, match="2-64 letters"):
        users.create("olga\n", "operator", None, Actor("test"))


def test_duplicate_username_is_409(client, auth):
    auth.as_role("admin", "root")
    response = client.post("/admin/users", data={"username": "root", "role": "viewer", "password": "",
                                                  "csrf_token": auth.csrf("/admin/users")})
    assert response.status_code == 409
    assert "already exists" in response.get_data(as_text=True)
    # "Root" would read as root in every list and audit row.
    cased = client.post("/admin/users", data={"username": "Root", "role": "viewer", "password": "",
                                              "csrf_token": auth.csrf("/admin/users")})
    assert cased.status_code == 409
    assert "a user named &#39;Root&#39; differs from &#39;root&#39; only in case" in cased.get_data(as_text=True)
    assert db.session.query(User).count() == 1


def test_role_change_over_htmx_returns_the_row_and_audits_before_and_after(client, auth):
    target = auth.make_user("olga", "viewer")
    auth.as_role("admin", "root")
    response = client.post(f"/admin/users/{target.id}", headers={"HX-Request": "true"}, data={
        f"u{target.id}-role": "approver", f"u{target.id}-active": "1", "csrf_token": auth.csrf()})
    assert response.status_code == 200
    fragment = response.get_data(as_text=True)
    assert fragment.lstrip().startswith(f'<tr id="user-{target.id}"') and "saved" in fragment
    db.session.refresh(target)
    assert target.role == "approver"
    entry = last_audit()
    assert (entry.action, entry.before["role"], entry.after["role"]) == ("user.update", "viewer", "approver")


def test_a_stale_row_does_not_undo_another_admins_change(client, auth):
    """adm2's row still showed manager when they disabled mg1: their Save put the role back, and the audit had adm2
    demote mg1 from approver (helper 122)."""
    target = auth.make_user("mg1", "manager")
    auth.as_role("admin", "root")
    page = client.get("/admin/users").get_data(as_text=True)
    assert f'name="u{target.id}-seen" type="hidden" value="manager:1"' in page
    users.update(target, Actor("admin"), role="approver")  # another admin's Save, after this page was drawn
    stale = {f"u{target.id}-role": "manager", f"u{target.id}-active": "0", f"u{target.id}-seen": "manager:1",
             "csrf_token": auth.csrf()}
    response = client.post(f"/admin/users/{target.id}", headers={"HX-Request": "true"}, data=stale)
    assert response.status_code == 409
    row = response.get_data(as_text=True)
    assert ("mg1 was changed since this page was drawn (now approver, active); nothing was saved: look again and "
            "save once more") in row
    assert 'value="approver:1"' in row  # the row drawn again shows what holds now, ready to save over it
    db.session.refresh(target)
    assert (target.role, target.active) == ("approver", True)
    assert [e.after["role"] for e in db.session.execute(select(AuditEntry).where(
        AuditEntry.action == "user.update")).scalars()] == ["approver"]
    again = client.post(f"/admin/users/{target.id}", headers={"HX-Request": "true"},
                        data={**stale, f"u{target.id}-role": "approver", f"u{target.id}-seen": "approver:1"})
    assert again.status_code == 200
    db.session.refresh(target)
    assert (target.role, target.active) == ("approver", False)


def test_the_last_admin_cannot_be_demoted(client, auth):
    root = auth.as_role("admin", "root")
    response = client.post(f"/admin/users/{root.id}", headers={"HX-Request": "true"}, data={
        f"u{root.id}-role": "viewer", f"u{root.id}-active": "1", "csrf_token": auth.csrf()})
    assert response.status_code == 409
    assert "last active admin" in response.get_data(as_text=True)
    db.session.refresh(root)
    assert root.role == "admin"


def test_the_last_admin_of_every_tenant_cannot_be_demoted_or_disabled_beside_tenant_admins(client, auth):
    # Admins limited to a tenant cannot make tenants or manage the others' people: they do not count as the admin left.
    auth.make_user("acme-admin", "admin", tenant=make_tenant("acme"))
    root = auth.as_role("admin", "root")
    for role, active in (("viewer", "1"), ("admin", "0")):
        response = client.post(f"/admin/users/{root.id}", headers={"HX-Request": "true"}, data={
            f"u{root.id}-role": role, f"u{root.id}-active": active, "csrf_token": auth.csrf()})
        assert response.status_code == 409
        assert "last active admin not limited to a tenant" in response.get_data(as_text=True)
        db.session.refresh(root)
        assert (root.role, root.active) == ("admin", True)
    auth.make_user("other-root", "admin")
    response = client.post(f"/admin/users/{root.id}", headers={"HX-Request": "true"}, data={
        f"u{root.id}-role": "viewer", f"u{root.id}-active": "1", "csrf_token": auth.csrf()})
    assert response.status_code == 200
    db.session.refresh(root)
    assert root.role == "viewer"


def issued_on_the_page(client, auth, **fields):
    """Log in as the admin root and issue a token for a new operator svc through the form; return (svc, answer)."""
    svc = auth.make_user("svc", "operator")
    auth.as_role("admin", "root")
    response = client.post("/admin/tokens", data={"user": str(svc.id), "name": "billing", **fields,
                                                  "csrf_token": auth.csrf("/admin/tokens")})
    assert response.status_code == 201
    return svc, response


def test_token_is_shown_once_stored_hashed_and_revocable(client, auth):
    svc, response = issued_on_the_page(client, auth, tenant="default")
    plaintext = re.search(r'id="new-token">(rb_[^<]+)<', response.get_data(as_text=True)).group(1)
    assert plaintext not in client.get("/admin/tokens").get_data(as_text=True)
    token = db.session.query(ApiToken).one()
    assert token.token_hash != plaintext and token.tenant.name == "default"
    api = client.application.test_client()
    me = api.get("/api/me", headers={"Authorization": f"Bearer {plaintext}"})
    assert me.status_code == 200, me.json
    assert me.json["tenant"] == "default"
    response = client.post(f"/admin/tokens/{token.id}/revoke", data={"csrf_token": auth.csrf()})
    assert response.status_code == 302
    assert api.get("/api/me", headers={"Authorization": f"Bearer {plaintext}"}).status_code == 401
    tokens_audited = db.session.query(AuditEntry).filter(AuditEntry.target_type == "api_token").order_by(AuditEntry.seq)
    assert [e.action for e in tokens_audited] == ["token.create", "token.revoke"]
    # A second press says it was already revoked (it said "Revoked" again), and audits nothing more.
    again = client.post(f"/admin/tokens/{token.id}/revoke", data={"csrf_token": auth.csrf()}, follow_redirects=True)
    assert f"Token {token.prefix}… was already revoked (" in again.get_data(as_text=True)
    assert db.session.query(AuditEntry).filter(AuditEntry.action == "token.revoke").count() == 1


def test_the_new_token_says_whom_it_acts_as_and_which_tenants_it_reaches_and_why_it_was_limited(client, auth):
    acme = make_tenant("acme")
    olga = auth.make_user("olga", "operator", tenant=acme)
    auth.as_role("admin", "root")

    def issue(user, tenant: str) -> str:
        page = client.post("/admin/tokens", data={"user": str(user.id), "tenant": tenant,
                                                  "csrf_token": auth.csrf("/admin/tokens")}).get_data(as_text=True)
        return " ".join(re.sub(r"<[^>]+>", "", page.split('id="new-token-reach">')[1].split("</p>")[0]).split())

    # "All tenants" for a person who acts for one tenant only gave a token of that tenant, without a word.
    assert issue(olga, "") == ("Acts as olga (operator), for tenant acme only: olga acts only for acme, so a token of "
                               "theirs can reach no other tenant.")
    assert issue(olga, "acme") == "Acts as olga (operator), for tenant acme only."
    # The list says whom each person acts for; another tenant is refused at the tenant field.
    page = client.get("/admin/tokens").get_data(as_text=True)
    assert f'<option value="{olga.id}">olga (operator, acme)</option>' in page
    make_tenant("globex")
    refused = client.post("/admin/tokens", data={"user": str(olga.id), "tenant": "globex",
                                                 "csrf_token": auth.csrf("/admin/tokens")})
    assert refused.status_code == 422
    tenant_field = refused.get_data(as_text=True).split('name="tenant"')[1].split("</div>")[0]
    assert "olga may only act for tenant acme" in tenant_field
    assert issue(auth.make_user("svc", "operator"), "") == "Acts as svc (operator), for all tenants."


def test_disabling_a_person_revokes_their_tokens_for_good(client, auth):
    """Their tokens only paused while the account was disabled: a re-enable (a compromised account's) brought back
    every one unseen, while their sessions stayed ended (helper 115)."""
    svc, _ = issued_on_the_page(client, auth)
    plaintext = tokens.issue(svc, Actor("root"), name="second")[1]
    response = client.post(f"/admin/users/{svc.id}", headers={"HX-Request": "true"}, data={
        f"u{svc.id}-role": "operator", f"u{svc.id}-active": "0", "csrf_token": auth.csrf()})
    assert "2 API tokens revoked with the disable" in response.get_data(as_text=True)
    page = client.get("/admin/tokens").get_data(as_text=True)
    assert page.count(">revoked</span>") == 2 and '">active</span>' not in page
    rows = db.session.execute(select(AuditEntry.note).where(AuditEntry.action == "token.revoke")).scalars().all()
    assert rows == ["svc's account was disabled"] * 2
    users.update(svc, Actor("root"), active=True)
    assert client.get("/api/me", headers={"Authorization": f"Bearer {plaintext}"}).status_code == 401
    # A token for a disabled person would wait, refused, for a re-enable to bring it back: not issued.
    users.update(svc, Actor("root"), active=False)
    with pytest.raises(Conflict, match="svc's account is disabled: enable it first"):
        tokens.issue(svc, Actor("root"))


def test_a_re_enable_revokes_tokens_a_disable_before_the_upgrade_left_live(client, auth):
    """An account disabled by a release whose disable revoked nothing kept its tokens: enabled again after the
    upgrade, its old token answered 200 and submitted runs (helper 130)."""
    svc, _ = issued_on_the_page(client, auth)
    plaintext = tokens.issue(svc, Actor("root"), name="second")[1]
    db.session.execute(update(User).where(User.id == svc.id).values(active=False))  # the old release's disable
    db.session.commit()
    response = client.post(f"/admin/users/{svc.id}", headers={"HX-Request": "true"}, data={
        f"u{svc.id}-role": "operator", f"u{svc.id}-active": "1", f"u{svc.id}-seen": "operator:0",
        "csrf_token": auth.csrf()})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert "2 API tokens revoked with the re-enable: they were from before the disable" in response.get_data(
        as_text=True)
    assert client.get("/api/me", headers={"Authorization": f"Bearer {plaintext}"}).status_code == 401
    rows = db.session.execute(select(AuditEntry.note).where(AuditEntry.action == "token.revoke")).scalars().all()
    assert rows == ["svc's account was enabled again; its tokens from before it was disabled stay revoked"] * 2
    # A token issued after the re-enable is the person's own, and stays.
    db.session.refresh(svc)
    kept = tokens.issue(svc, Actor("root"), name="third")[1]
    users.update(svc, Actor("root"), role="viewer")
    assert client.get("/api/me", headers={"Authorization": f"Bearer {kept}"}).status_code == 200


def test_a_token_for_a_person_disabled_since_the_page_was_drawn_says_so(client, auth):
    """The form answered "Not a valid choice." (the list had been drawn with them in it) (helper 121)."""
    svc = auth.make_user("svc", "operator")
    auth.as_role("admin", "root")
    form = {"user": str(svc.id), "csrf_token": auth.csrf("/admin/tokens")}
    users.update(svc, Actor("root"), active=False)
    refused = client.post("/admin/tokens", data=form)
    assert refused.status_code == 409
    user_field = refused.get_data(as_text=True).split('name="user"')[1].split("</div>")[0]
    assert "svc&#39;s account is disabled: enable it first" in user_field
    assert f'value="{svc.id}"' not in user_field  # the list offers active people only, as before
    # And chooses nobody: the first person (an admin) was selected, so pressing again issued a token acting as them
    # (helper 128). The page opens that way too: who a token acts as is chosen, never defaulted.
    for page in (refused.get_data(as_text=True), client.get("/admin/tokens").get_data(as_text=True)):
        chooser = page.split('name="user"')[1].split("</select>")[0]
        assert '<option selected value="">choose who it acts as</option>' in chooser
        assert chooser.count("selected") == 1
    again = client.post("/admin/tokens", data={"user": "", "csrf_token": auth.csrf("/admin/tokens")})
    assert again.status_code == 422 and "choose who the token acts as" in again.get_data(as_text=True)
    assert db.session.execute(select(ApiToken)).first() is None


def test_a_token_of_a_person_disabled_before_tokens_were_revoked_reads_user_disabled(client, auth):
    """The API refused it (401) while the tokens page said "active"."""
    svc, _ = issued_on_the_page(client, auth)
    svc.active = False  # as an account disabled by an earlier version, whose disable left its tokens live
    db.session.commit()
    page = client.get("/admin/tokens").get_data(as_text=True)
    assert ">user disabled</span>" in page and '">active</span>' not in page


def test_sending_the_token_form_again_issues_no_second_token(client, auth):
    svc = auth.make_user("svc", "operator")
    auth.as_role("admin", "root")
    page = client.get("/admin/tokens").get_data(as_text=True)
    key = re.search(r'id="issue_key" name="issue_key" type="hidden" value="([0-9a-f]{32})"', page).group(1)
    form = {"user": str(svc.id), "name": "billing", "issue_key": key, "csrf_token": auth.csrf("/admin/tokens")}
    first = client.post("/admin/tokens", data=form)
    assert first.status_code == 201 and 'id="new-token"' in first.get_data(as_text=True)
    next_key = re.search(r'name="issue_key" type="hidden" value="([0-9a-f]{32})"', first.get_data(as_text=True))
    assert next_key and next_key.group(1) != key  # the form under the new token is for the next one
    again = client.post("/admin/tokens", data=form)  # the browser's reload of the answer
    text = again.get_data(as_text=True)
    assert again.status_code == 409 and 'id="new-token"' not in text
    token = db.session.query(ApiToken).one()
    assert f"this form already issued token {token.prefix}… at" in text and "revoke it below" in text
    assert db.session.query(AuditEntry).filter(AuditEntry.action == "token.create").count() == 1
    second = client.post("/admin/tokens", data={**form, "issue_key": next_key.group(1)})
    assert second.status_code == 201 and db.session.query(ApiToken).count() == 2
    # A send without a key the page gave (a script, an old page) still issues, as before.
    assert client.post("/admin/tokens", data={**form, "issue_key": "x' OR 1=1"}).status_code == 201


def test_the_admin_address_alone_opens_its_first_page_for_admins_only(client, auth):
    # A typed /admin was a 404; the nav's Admin link opens People.
    auth.as_role("admin", "root")
    assert client.get("/admin", follow_redirects=True).request.path == "/admin/users"
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.as_role("operator", "olga")
    assert client.get("/admin/").status_code == 403


def test_a_token_issued_for_30_days_says_when_it_expires_and_an_expired_one_reads_expired(client, auth):
    svc, response = issued_on_the_page(client, auth, days="30")
    token = db.session.query(ApiToken).one()
    assert timedelta(days=29, hours=23) < token.expires_at - utcnow() <= timedelta(days=30)
    row = re.search(r'<td class="mono">rb_[^<]+</td>(.*?)</tr>', response.get_data(as_text=True), re.S).group(1)
    assert f"{token.expires_at:%Y-%m-%d}" in row and '<span class="badge active">active</span>' in row
    tokens.issue(svc, Actor("test"), name="old", days=1, clock=lambda: utcnow() - timedelta(days=2))
    page = client.get("/admin/tokens").get_data(as_text=True)
    expired = re.search(r'<td>old</td>(.*?)</tr>', page, re.S).group(1)
    assert '<span class="badge expired">expired</span>' in expired and "Revoke" not in expired
    [entry] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "token.create",
                                                          AuditEntry.actor == "root")).scalars()
    assert entry.after["expires_at"] == token.expires_at.isoformat()
