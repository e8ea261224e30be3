"""The audit log is append-only and hash-chained; tampering is found."""

import csv
import io
import json
import re
from datetime import UTC, datetime

import pytest
from sqlalchemy import select, text

from console.extensions import db
from console.models import AuditEntry, Tenant
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.people import tokens, users
from console.services.policies import versions as policies
from tests.audit_tools import plain_sha256, rechain
from tests.factories import bearer, make_tenant


def write_rows(n: int):
    for i in range(n):
        audit.record(db.session, Actor("ops"), "thing.change", "thing", i, before={"v": i}, after={"v": i + 1})
        db.session.commit()


def test_chain_verifies_after_many_changes(app):
    already = audit.verify(db.session).checked  # the default policies were saved at start
    write_rows(12)
    report = audit.verify(db.session)
    assert report.ok and report.checked == already + 12


def test_editing_a_row_behind_the_orm_is_found(app):
    write_rows(5)
    db.session.execute(text("UPDATE audit_log SET actor = 'someone-else' WHERE seq = 3"))
    db.session.commit()
    report = audit.verify(db.session)
    assert not report.ok and report.first_bad_seq == 3


def test_deleting_a_row_is_found(app):
    write_rows(5)
    db.session.execute(text("DELETE FROM audit_log WHERE seq = 2"))
    db.session.commit()
    assert audit.verify(db.session).first_bad_seq == 2


def test_deleting_the_newest_rows_is_found(app):
    write_rows(5)
    db.session.execute(text("DELETE FROM audit_log WHERE seq >= 4"))
    db.session.commit()
    report = audit.verify(db.session)
    assert not report.ok and "removed" in report.problem


def test_verify_names_every_row_touched_not_only_the_first(app, client, auth):
    """An auditor needs the extent of a tampering: the walk stopped at the first bad row, hiding the rest."""
    base = audit.verify(db.session).checked
    write_rows(12)
    first, second, gone = base + 3, base + 7, base + 10
    db.session.execute(text("UPDATE audit_log SET actor = 'someone-else' WHERE seq IN (:a, :b)"),
                       {"a": first, "b": second})
    db.session.execute(text("DELETE FROM audit_log WHERE seq = :s"), {"s": gone})
    db.session.commit()
    report = audit.verify(db.session)
    assert (report.ok, report.first_bad_seq, report.unlisted) == (False, first, 0)
    assert report.problem.startswith(f"row {first} does not match its MAC")
    assert [seq for seq, _ in report.also] == [second, gone]
    assert report.also[1][1] == f"row {gone} is missing: the log goes from row {gone - 1} to row {gone + 1}"
    assert report.checked == base + 11  # every row there is was read
    cli = app.test_cli_runner().invoke(args=["audit", "verify"])
    assert cli.exit_code == 1 and f"broken at row {first}" in cli.output
    assert f"also: row {second} does not match its MAC" in cli.output and f"also: row {gone} is missing" in cli.output
    auth.as_role("admin")
    page = client.get("/audit/verify", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert f"Hash chain broken at row {first}" in page and page.count("<li>Also: ") == 2


def test_a_log_rewritten_from_one_row_on_lists_the_first_problems_and_counts_the_rest(app):
    write_rows(40)
    rechain(5, plain_sha256)  # every row from 5 on re-linked without the audit key
    report = audit.verify(db.session)
    assert report.first_bad_seq == 5 and len(report.also) == audit.LISTED_PROBLEMS
    assert report.unlisted == report.checked - 4 - 1 - audit.LISTED_PROBLEMS  # rows 5 on, less those listed


def test_the_orm_refuses_to_rewrite_history(app):
    write_rows(1)
    entry = db.session.query(AuditEntry).first()
    entry.actor = "rewritten"
    with pytest.raises(PermissionError):
        db.session.commit()
    db.session.rollback()


def test_audit_verify_command_reports_the_chain(app):
    write_rows(3)
    runner = app.test_cli_runner()
    result = runner.invoke(args=["audit", "verify"])
    assert result.exit_code == 0 and f"{audit.verify(db.session).checked} rows verified" in result.output
    db.session.execute(text("UPDATE audit_log SET note = 'x' WHERE seq = 1"))
    db.session.commit()
    result = runner.invoke(args=["audit", "verify"])
    assert result.exit_code == 1 and "broken at row 1" in result.output


def test_audit_page_filters_and_tenant_people_see_only_their_tenant(client, auth):
    write_rows(2)
    audit.record(db.session, Actor("ops"), "run.replay", "run", 7, tenant="default")
    db.session.commit()
    auth.as_role("viewer", "vic")
    page = client.get("/audit/?action=run.").get_data(as_text=True)
    assert "run.replay" in page and "thing.change" not in page
    fragment = client.get("/audit/?action=thing", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="results">') and "thing.change" in fragment


def test_the_who_and_action_filters_match_underscores_and_percents_as_typed(client, auth):
    for actor, action in (("abe.approver", "task.pause"), ("abe_approver", "task_pause")):
        audit.record(db.session, Actor(actor), action, "task", 1)
    db.session.commit()
    auth.as_role("viewer", "vic")
    underscored = client.get("/audit/?actor=abe_approver").get_data(as_text=True)
    assert "abe_approver" in underscored and "abe.approver" not in underscored
    assert "task.pause" not in client.get("/audit/?action=task_pause").get_data(as_text=True)
    assert "abe_approver" not in client.get("/audit/?actor=%25").get_data(as_text=True)


def test_a_tenant_admin_reads_the_audit_rows_of_their_tenants_people_and_tokens(client, auth):
    acme = make_tenant("acme")
    admin = auth.make_user("acme.admin", "admin", tenant=acme)
    newbie = auth.make_user("acme.newbie", "operator", tenant=acme)
    users.update(newbie, Actor("root"), role="viewer")
    token, _ = tokens.issue(newbie, Actor("root"), name="ci")
    tokens.revoke(token.id, Actor("root"))
    tokens.revoke(token.id, Actor("root"))  # again: nothing changes, nothing is audited
    auth.make_user("globex.op", "operator", tenant=make_tenant("globex"))
    auth.login(admin.username)
    page = client.get("/audit/").get_data(as_text=True)
    for action in ("user.create", "user.update", "token.create", "token.revoke", "auth.login"):
        assert f">{action}<" in page, action
    assert page.count(">token.revoke<") == 1
    assert "globex.op" not in page  # another tenant's person, as before


def test_audit_page_pages_back_to_older_rows(client, auth):
    write_rows(55)
    auth.as_role("viewer")
    page = client.get("/audit/?action=thing").get_data(as_text=True)
    older = re.search(r'href="(/audit/\?before=(\d+)[^"]*)">Older →</a>', page)
    assert older and "action=thing" in older.group(1)
    rest = client.get(older.group(1).replace("&amp;", "&")).get_data(as_text=True)
    assert rest.count("thing.change") == 5 and "Older →" not in rest
    fragment = client.get("/audit/?action=thing", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="results">') and older.group(0) in fragment
    nothing = client.get("/audit/?action=nothing.at.all", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert '<td colspan="6" class="empty"><strong>Nothing matches.</strong>' in nothing


@pytest.mark.parametrize(("query", "says"), [
    ("before=abc", "before=abc is not an entry number"),
    ("before=0", "before=0 is not an entry number"),
    ("before=-3", "before=-3 is not an entry number"),
    ("before=1.5", "before=1.5 is not an entry number"),
    ("before=99999999999999999999999", "before=99999999999999999999… is not an entry number"),
    ("before=" + "9" * 5000, "before=99999999999999999999… is not an entry number"),
    ("hide_signins=yes%FF", "hide_signins is 1 to hide sign-ins, or left out; got yes%FF"),
])
def test_a_bad_paging_or_filter_parameter_is_422_saying_what_to_fix(client, auth, query, says):
    write_rows(3)
    auth.as_role("viewer")
    response = client.get(f"/audit/?action=thing&{query}")
    page = response.get_data(as_text=True)
    assert response.status_code == 422 and says in page, page
    assert "thing.change" not in page.split('id="results"')[1]  # no rows from a page the address does not name
    # The way on keeps the filters that were good.
    assert '<a class="button secondary" href="/audit/?action=thing">← Newest</a>' in page
    fragment = client.get(f"/audit/?action=thing&{query}", headers={"HX-Request": "true"})
    assert fragment.status_code == 422 and fragment.get_data(as_text=True).lstrip().startswith('<div id="results">')
    assert client.get("/audit/?action=thing&before=").status_code == 200  # an empty one is left out


def test_audit_values_read_as_written_and_markup_in_them_stays_text(client, auth):
    audit.record(db.session, Actor("ops"), "thing.rename", "thing", 1, before={"name": "Zürich…"},
                 after={"name": "<b>bold</b> & co"})
    db.session.commit()
    auth.as_role("viewer")
    page = client.get("/audit/?action=thing.rename").get_data(as_text=True)
    assert "{&#34;name&#34;: &#34;Zürich…&#34;}" in page and "\\u2026" not in page
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in page and "<b>bold</b>" not in page


def test_a_lone_surrogate_kept_in_a_row_shows_as_a_mark_not_a_500(client, auth):
    # Input is checked now; rows written before (a fix's params typed with \ud800) must not take the page down.
    audit.record(db.session, Actor("ops"), "thing.fix", "thing", 1, after={"params": {"x": "bad \ud800 char"}})
    db.session.commit()
    auth.as_role("viewer")
    response = client.get("/audit/?action=thing.fix")
    assert response.status_code == 200 and "bad ? char" in response.get_data(as_text=True)
    assert audit.verify(db.session).ok


def test_an_edit_reads_as_the_fields_it_changed_with_the_whole_rows_behind_a_fold(client, auth):
    audit.record(db.session, Actor("ops"), "thing.change", "thing", 1, before={"a": 1, "b": {"c": 2, "d": [1]}},
                 after={"a": 1, "b": {"c": 3, "d": [1]}, "e": "new"})
    db.session.commit()
    auth.as_role("viewer")
    page = client.get("/audit/?action=thing.change").get_data(as_text=True)
    cell = re.search(r'<td class="diff">(.*?)</td>', page, re.S).group(1)
    assert '<span class="key">b.c</span>: <span class="was">2</span> → <span class="now">3</span>' in cell
    # A field only the row after has (what the change set, or its context: a replay's series) reads as its value.
    assert ('<span class="key">e</span>: <span class="now" title="only in the row after: what the change set, or its '
            'context">&#34;new&#34;</span>') in cell and "—" not in cell
    assert '<span class="key">a</span>' not in cell  # unchanged fields stay in the fold
    assert "<details><summary>whole rows</summary>" in cell and "{&#34;a&#34;: 1" in cell


def test_a_policy_description_edit_is_in_its_audit_row(client, auth):
    policies.save("payments-fast", {"max_attempts": 3}, Actor("ops"), description="fast retries")
    policies.save("payments-fast", {"max_attempts": 3}, Actor("ops"), description="fast retries for the payments API")
    rows = db.session.execute(select(AuditEntry).where(AuditEntry.action == "policy.save",
                                                       AuditEntry.target_id == "payments-fast")
                              .order_by(AuditEntry.seq)).scalars().all()
    assert rows[0].after["description"] == "fast retries"
    assert (rows[1].before["description"], rows[1].after["description"]) == (
        "fast retries", "fast retries for the payments API")
    # Only the words changed: no new version (runs keep version 1), and the row says so.
    assert rows[1].note == "description; version 1 stays in force"
    assert policies.get("payments-fast").current_version == 1


def test_hide_sign_ins_leaves_auth_rows_out_with_the_other_filters_and_paging(client, auth):
    auth.as_role("viewer", "vic")  # its login is an auth.login row
    for i in range(60):
        audit.record(db.session, Actor("ops"), "thing.change", "thing", i)
        audit.record(db.session, Actor("vic"), "auth.logout" if i % 2 else "auth.login", "user", 1)
        db.session.commit()
    everything = client.get("/audit/").get_data(as_text=True)
    assert "<code>auth.login</code>" in everything and 'name="hide_signins" value="1">' in everything
    hidden = client.get("/audit/?hide_signins=1").get_data(as_text=True)
    assert "auth.log" not in hidden and hidden.count("<code>thing.change</code>") == 50
    assert 'name="hide_signins" value="1" checked>' in hidden
    older = re.search(r'href="(/audit/\?before=(\d+)[^"]*)">Older →</a>', hidden)
    assert older and "hide_signins=1" in older.group(1)
    rest = client.get(older.group(1).replace("&amp;", "&")).get_data(as_text=True)
    assert "auth.log" not in rest and rest.count("<code>thing.change</code>") == 10
    by_vic = client.get("/audit/?actor=vic&hide_signins=1", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "Nothing matches." in by_vic
    report = audit.verify(db.session)  # the chain still covers the rows the page hides
    assert report.ok and report.checked == db.session.query(AuditEntry).count()


def test_a_secret_in_fixed_params_never_reaches_the_audit_chain(client, dead_run, auth):
    """An auditor's walk: an api_key sent in a params fix stayed in clear in three chained rows for good."""
    _, letter_id = dead_run()
    olga = auth.make_user("olga", "operator")
    alex = auth.make_user("alex", "approver")
    filed = client.post(f"/api/dead-letters/{letter_id}/fix", headers=bearer(olga), json={
        "params": {"fail_times": 0, "api_key": "sk_live_SUPERSECRET123", "auth": {"db_password": "hunter2hunter2"}},
        "reason": "retry with the new key", "merge": True})
    assert filed.status_code == 202, filed.get_data(as_text=True)
    approved = client.post(f"/api/approvals/{filed.get_json()['approval_id']}/approve", headers=bearer(alex))
    assert approved.status_code == 200, approved.get_data(as_text=True)
    rows = db.session.execute(select(AuditEntry)).scalars().all()
    stored = " ".join(f"{row.before} {row.after} {row.note}" for row in rows)
    assert "SUPERSECRET" not in stored and "hunter2" not in stored
    assert "'api_key': '***'" in stored and "'db_password': '***'" in stored and "'fail_times': 0" in stored
    assert audit.verify(db.session).ok


def _export(client, kind: str, query: str = ""):
    response = client.get(f"/audit/export.{kind}{query}")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Content-Disposition"].startswith('attachment; filename="rebound-audit-')
    # A CSV starts with the byte-order mark Excel needs to read it as UTF-8, and says its charset.
    assert response.get_data().startswith(b"\xef\xbb\xbf") == (kind == "csv")
    assert kind != "csv" or response.content_type == "text/csv; charset=utf-8"
    return response.get_data().decode("utf-8-sig")


def test_the_audit_log_exports_whole_as_csv_and_json_lines_with_its_filters(client, auth):
    """An auditor takes the evidence out: every selected row, oldest first, past any page, formulas kept as text."""
    audit.record_many(db.session, Actor("ops"), "thing.change", "thing",
                      [audit.Change(n, {"v": n}, {"v": n + 1}) for n in range(2_500)])
    audit.record(db.session, Actor("=HYPERLINK(\"http://evil\")"), "run.replay", "run", 7, tenant="default",
                 after={"note": "-2+3", "line": "a\nb"}, note="@SUM(A1)")
    db.session.commit()
    auth.as_role("viewer", "aud")
    rows = list(csv.DictReader(io.StringIO(_export(client, "csv"))))
    seqs = [int(row["seq"]) for row in rows]
    assert seqs == sorted(seqs) and len([row for row in rows if row["action"] == "thing.change"]) == 2_500
    # Every row, past any page or batch, down to the export's own record.
    assert [(row["action"], row["actor"]) for row in rows[-2:]] == [("auth.login", "aud"), ("audit.export", "aud")]
    replay = next(row for row in rows if row["action"] == "run.replay")
    assert replay["actor"] == "'=HYPERLINK(\"http://evil\")" and replay["note"] == "'@SUM(A1)"
    assert json.loads(replay["after"]) == {"line": "a\nb", "note": "-2+3"}
    lines = [json.loads(line) for line in _export(client, "jsonl", "?action=run.").splitlines()]
    assert [(line["action"], line["actor"], line["tenant"]) for line in lines] == [
        ("run.replay", "=HYPERLINK(\"http://evil\")", "default")]
    [taken] = db.session.execute(select(AuditEntry).where(AuditEntry.action == "audit.export")
                                 .order_by(AuditEntry.seq.desc()).limit(1)).scalars().all()
    assert (taken.actor, taken.target_id, taken.after) == ("aud", "jsonl", {"filters": {"action": "run."}})


def test_the_days_select_rows_and_a_day_that_is_none_is_refused(client, auth, clock):
    clock.set(datetime(2026, 11, 30, 23, 59, tzinfo=UTC))
    audit.record(db.session, Actor("ops"), "late.change", "thing", 1, clock=clock)
    clock.advance(120)
    audit.record(db.session, Actor("ops"), "early.change", "thing", 2, clock=clock)
    db.session.commit()
    auth.as_role("viewer")
    page = client.get("/audit/?since=2026-12-01&until=2026-12-01").get_data(as_text=True)
    assert "early.change" in page and "late.change" not in page
    assert [json.loads(line)["action"] for line in _export(client, "jsonl", "?until=2026-11-30").splitlines()] == [
        "late.change"]
    for query, said in (("since=yesterday", "since=yesterday is not a day: write it as YYYY-MM-DD (UTC)"),
                        ("until=9999-12-31", "until=9999-12-31 is not a day"),
                        ("since=2026-12-02&until=2026-12-01", "until is before since")):
        assert said in client.get(f"/audit/?{query}").get_data(as_text=True)
        refused = client.get(f"/audit/export.csv?{query}")
        assert refused.status_code == 422 and said in refused.get_data(as_text=True)


def test_a_tenant_limited_person_exports_only_their_tenants_rows(client, auth):
    audit.record(db.session, Actor("ops"), "run.replay", "run", 7, tenant="acme")
    audit.record(db.session, Actor("ops"), "run.replay", "run", 8, tenant="globex", note="globex-secret")
    audit.record(db.session, Actor("ops"), "policy.save", "policy", "default")  # every tenant's: unscoped only
    db.session.commit()
    auth.make_user("acme.aud", "viewer", tenant=make_tenant("acme"))
    auth.login("acme.aud")
    csv_rows = list(csv.DictReader(io.StringIO(_export(client, "csv"))))
    json_rows = [json.loads(line) for line in _export(client, "jsonl").splitlines()]
    for rows in (csv_rows, json_rows):
        assert [(row["action"], row["target_id"]) for row in rows if row["action"] == "run.replay"] == [
            ("run.replay", "7")]
        assert {row["tenant"] for row in rows} == {"acme"}
    assert "globex" not in _export(client, "csv")


def test_a_tenant_filter_reads_one_tenants_rows_and_a_limited_person_may_name_only_their_own(client, auth):
    """`?tenant=` was no filter: ignored for everyone, another tenant's name included."""
    make_tenant("acme"), make_tenant("globex")
    audit.record(db.session, Actor("ops"), "run.replay", "run", 7, tenant="acme")
    audit.record(db.session, Actor("ops"), "run.replay", "run", 8, tenant="globex")
    db.session.commit()
    auth.as_role("admin", "root")
    page = client.get("/audit/?tenant=globex&action=run.").get_data(as_text=True)
    assert "run:<wbr>8" in page and "run:<wbr>7" not in page and '<option selected>globex</option>' in page
    assert "tenant=globex" in page.split('class="subtle export-links"')[1]  # its exports keep the filter
    exported = list(csv.DictReader(io.StringIO(client.get("/audit/export.csv?tenant=globex").get_data(as_text=True))))
    assert {row["tenant"] for row in exported} == {"globex"}
    assert client.get("/audit/?tenant=nobody").status_code == 422
    client.post("/logout", data={"csrf_token": auth.csrf()})
    auth.make_user("acme.aud", "viewer", tenant=db.session.execute(
        select(Tenant).where(Tenant.name == "acme")).scalar_one())
    auth.login("acme.aud")
    assert client.get("/audit/?tenant=globex").status_code == 403
    own = client.get("/audit/?tenant=acme").get_data(as_text=True)
    assert "run:<wbr>7" in own and "run:<wbr>8" not in own and 'id="audit-tenant"' not in own  # no choice to make


def test_a_request_for_approval_reads_field_by_field_like_an_edit(client, auth):
    """Its row showed the change it asks for as one raw blob, {"after": {…}, "before": {…}}."""
    audit.record(db.session, Actor("olga"), "approval.request", "approval", 7,
                 after={"kind": "dlq.fix_params", "subject": "dead_letter:77",
                        "before": {"params": {"account": 42}}, "after": {"params": {"account": 43}}})
    db.session.commit()
    auth.as_role("admin")
    page = client.get("/audit/?action=approval.request").get_data(as_text=True)
    row = re.search(r'<td class="diff">(.*?)</td>', page, re.S).group(1)
    assert re.search(r'<span class="key">params\.account</span>: <span class="was">42</span> → '
                     r'<span class="now">43</span>', row), row
    assert "<details><summary>whole rows</summary>" in row  # the request itself, whole, behind it
