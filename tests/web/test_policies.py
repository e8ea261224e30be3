"""Policies: list, edit with the domain's validation, live backoff preview with the SLA check, history."""

import html
import json
import re

from sqlalchemy import select

from console.domain.policy import RetryPolicy, retry_schedule
from console.extensions import db
from console.models import AuditEntry, PolicyVersion
from console.services.actor import Actor
from console.services.people import tenants
from console.services.policies import versions as policies
from console.services.scheduling import tasks
from tests.factories import make_tenant

# The `quick` policy of config/tasks/retry-policies.yaml, as its edit form posts it.
QUICK = {
    "description": "Three fast attempts for cheap, idempotent work.", "max_attempts": "3", "base_delay_s": "1",
    "multiplier": "2", "max_delay_s": "10", "jitter": "0.1", "timeout_s": "60", "concurrency": "20",
    "queue_limit": "5000", "retryable_codes": "", "non_retryable_codes": "", "breaker_failure_threshold": "5",
    "breaker_open_s": "30", "breaker_success_threshold": "3", "sla_max_start_delay_s": "", "sla_deadline_s": "",
}


def make_task(name: str, policy: str | None = "quick", tenant: str = "default", deadline_s: int | None = None):
    data = {"name": name, "handler": "demo.noop", "cron": "0 3 * * *"}
    if policy:
        data["policy"] = policy
    if deadline_s:
        data["sla"] = {"deadline_s": deadline_s}
    return tasks.register(tenants.find(tenant), data, Actor("test"))



def post_form(client, auth, path: str, **changes):
    return client.post(path, data={**QUICK, **changes, "csrf_token": auth.csrf("/policies/")})


def row(page: str, policy: str) -> str:
    match = re.search(rf'<tr data-policy="{re.escape(policy)}">(.*?)</tr>', page, re.S)
    assert match, f"no row for {policy}"
    return match.group(1)


def figure_of(page: str) -> dict:
    match = re.search(r'data-figure="([^"]+)"', page)
    assert match, "no chart in the preview"
    return json.loads(html.unescape(match.group(1)))


def versions(name: str) -> list[int]:
    record = policies.get(name)
    return db.session.execute(select(PolicyVersion.version).where(PolicyVersion.policy_id == record.id)
                              .order_by(PolicyVersion.version)).scalars().all()


def test_list_shows_version_key_fields_and_how_many_tasks_use_each_policy(client, auth):
    make_tenant("globex")
    make_task("nightly-export")
    make_task("cleanup", tenant="globex")
    make_task("plain", policy=None)  # no policy: runs under default
    auth.as_role("viewer")
    response = client.get("/policies/")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    quick = row(page, "quick")
    assert "v1" in quick and "±10%" in quick and ">10 s<" in quick and ">1 min<" in quick
    assert 'data-tasks="2"' in quick
    assert 'data-tasks="1"' in row(page, "default")
    assert 'data-tasks="0"' in row(page, "external-api")
    assert "New policy" not in page


def test_tenant_limited_user_counts_only_their_tenants_tasks(client, auth):
    globex = make_tenant("globex")
    make_task("nightly-export")
    make_task("cleanup", tenant="globex")
    auth.make_user("gina", "operator", tenant=globex)
    auth.login("gina")
    page = client.get("/policies/").get_data(as_text=True)
    assert 'data-tasks="1"' in row(page, "quick")
    # Counted as hers, said so: "1" read as all a change would touch (helper 140).
    assert "Your tasks</th>" in page
    # Policies are every tenant's: she reads them and is not offered a form she may not save.
    assert "New policy" not in page
    edit = client.get("/policies/quick").get_data(as_text=True)
    assert "it is shared by every tenant, so only a person not limited to a tenant changes it" in edit
    assert "nightly-export" not in edit
    assert "Used by <code>cleanup</code> in your tenant; other tenants' tasks may use it too." in edit
    assert "No task of your tenant uses it; other tenants' tasks may." in client.get("/policies/external-api").text
    new = client.get("/policies/new").get_data(as_text=True)  # a form with no Save said nothing of why
    assert "a policy is shared by every tenant, so only a person not limited to a tenant creates one" in new
    assert "Save as version" not in edit
    field = re.search(r'<input[^>]*id="max_attempts"[^>]*>', edit).group(0)
    assert re.search(r"\bdisabled\b", field)


def test_valid_edit_saves_a_new_version_audits_it_and_shows_the_diff(client, auth):
    auth.as_role("operator", "olga")
    response = post_form(client, auth, "/policies/quick", max_attempts="4", non_retryable_codes="http_404, http_400")
    assert response.status_code == 303
    assert response.headers["Location"] == "/policies/quick"
    assert versions("quick") == [1, 2]
    spec = policies.current_version(policies.get("quick")).spec
    assert spec["max_attempts"] == 4 and spec["non_retryable_codes"] == ["http_404", "http_400"]
    entry = db.session.execute(select(AuditEntry).where(AuditEntry.action == "policy.save")
                               .order_by(AuditEntry.seq.desc())).scalars().first()
    assert (entry.actor, entry.target_id, entry.before["max_attempts"], entry.after["max_attempts"]) == (
        "olga", "quick", 3, 4)
    page = client.get("/policies/quick").get_data(as_text=True)
    assert "Saved quick as version 2" in page
    history = page[page.index('id="history"'):]
    assert '<span class="key">max_attempts</span>: <span class="was">3</span> → <span class="now">4</span>' in history
    assert ('<span class="key">non_retryable_codes</span>: <span class="was">[]</span> → '
            '<span class="now">http_404, http_400</span>') in history
    assert "olga" in history and "created" in history  # v2 by olga, v1 as created


def test_saving_over_a_version_saved_meanwhile_is_409_until_reviewed(client, auth):
    auth.as_role("operator", "olga")
    page = client.get("/policies/quick").get_data(as_text=True)
    assert re.search(r'name="base_version" type="hidden" value="1"', page)
    spec = policies.current_version(policies.get("quick")).spec
    policies.save("quick", {**spec, "timeout_s": 90}, Actor("pat"))
    response = post_form(client, auth, "/policies/quick", base_version="1", max_attempts="4")
    assert response.status_code == 409
    page = response.get_data(as_text=True)
    assert ("pat saved version 2 while you edited version 1; see what they changed under Version history, then save "
            "again to replace it with your values.") in page and 'value="4"' in page
    assert re.search(r'name="base_version" type="hidden" value="2"', page)
    assert versions("quick") == [1, 2]
    assert post_form(client, auth, "/policies/quick", base_version="2", max_attempts="4").status_code == 303
    assert versions("quick") == [1, 2, 3]


def test_a_viewer_reads_the_policy_without_a_save_button(client, auth):
    auth.as_role("viewer")
    page = client.get("/policies/quick").get_data(as_text=True)
    assert "You can read this policy; changing it needs the operator role." in page
    assert "Save as version 2" not in page and " disabled" in page


def test_an_operator_may_save_the_policy(client, auth):
    auth.as_role("operator")
    page = client.get("/policies/quick").get_data(as_text=True)
    assert "You can read this policy" not in page and "Save as version 2" in page


def test_a_tampered_version_field_is_422_and_saves_nothing(client, auth):
    auth.as_role("operator")
    response = post_form(client, auth, "/policies/quick", base_version="1 OR 1=1", max_attempts="4")
    assert response.status_code == 422
    assert "the page&#39;s version field was changed; reload the page" in response.get_data(as_text=True)
    assert versions("quick") == [1]


def test_saving_unchanged_values_makes_no_version(client, auth):
    auth.as_role("operator")
    response = post_form(client, auth, "/policies/quick")
    assert response.status_code == 303
    assert versions("quick") == [1]
    assert "No changes to quick" in client.get("/policies/quick").get_data(as_text=True)
    # New words only: saved, still no version (the runs' policy is the same).
    assert post_form(client, auth, "/policies/quick", description="retries for the quick lane").status_code == 303
    assert versions("quick") == [1]
    assert "Saved quick&#39;s description; its settings stay at version 1." in client.get(
        "/policies/quick").get_data(as_text=True)


def test_invalid_value_is_422_on_its_field_keeps_the_values_and_saves_nothing(client, auth):
    auth.as_role("operator")
    audits = db.session.query(AuditEntry).count()
    response = post_form(client, auth, "/policies/quick", max_attempts="0", description="kept as typed")
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    field = re.search(r'<input[^>]*id="max_attempts"[^>]*>\s*<div class="field-error"[^>]*>([^<]*)</div>', page)
    assert field and "Max attempts must be an integer from 1 to 100, got 0" in field.group(1)
    assert 'value="kept as typed"' in page and 'aria-invalid="true"' in page
    assert versions("quick") == [1]
    assert db.session.query(AuditEntry).count() == audits


def test_every_bad_value_is_marked_at_once_and_nothing_is_saved(client, auth):
    auth.as_role("operator")
    response = post_form(client, auth, "/policies/quick", max_attempts="0", multiplier="20", jitter="5",
                         timeout_s="-3", base_delay_s="10", max_delay_s="5", retryable_codes="http_503",
                         non_retryable_codes="http_503")
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    marked = dict(re.findall(r'<input[^>]*id="(\w+)"[^>]*>\s*<div class="field-error"[^>]*>([^<]*)</div>', page))
    assert set(marked) >= {"max_attempts", "multiplier", "jitter", "timeout_s", "max_delay_s", "non_retryable_codes"}
    assert marked["max_delay_s"].startswith("Max delay (s) must be at least Base delay (s) (10)")
    assert "Nothing was saved: fix the 6 fields marked below." in page
    assert versions("quick") == [1]


def test_a_nested_breaker_error_lands_on_its_own_field(client, auth):
    auth.as_role("operator")
    response = post_form(client, auth, "/policies/quick", breaker_open_s="0")
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    field = re.search(r'<input[^>]*id="breaker_open_s"[^>]*value="0"[^>]*>\s*'
                      r'<div class="field-error"[^>]*>([^<]*)</div>', page)
    assert field and field.group(1).startswith("Stays open (s) must be an integer from 1 to 86400")
    assert versions("quick") == [1]
    # The form names fields by their labels; the API keeps its keys (sla.deadline_s).
    page = post_form(client, auth, "/policies/quick", sla_deadline_s="-3").get_data(as_text=True)
    assert re.search(r'id="sla_deadline_s"[^>]*>\s*<div class="field-error"[^>]*>Deadline \(s\) must be an integer',
                     page)


def test_create_a_policy_and_refuse_reserved_or_taken_names(client, auth):
    auth.as_role("operator")
    assert client.get("/policies/new?from=quick").status_code == 200
    response = post_form(client, auth, "/policies/new", name="payments-api", max_attempts="6")
    assert response.status_code == 303 and response.headers["Location"] == "/policies/payments-api"
    assert policies.current_version(policies.get("payments-api")).spec["max_attempts"] == 6
    for name, message in (("new", "reserved"), ("quick", "exists already"), ("Bad Name", "lowercase")):
        response = post_form(client, auth, "/policies/new", name=name)
        assert response.status_code == 422
        assert re.search(rf'id="name"[^>]*>\s*<div class="field-error"[^>]*>[^<]*{message}',
                         response.get_data(as_text=True))


def test_preview_draws_nominal_band_and_cumulative_traces_from_the_schedule(client, auth):
    auth.as_role("operator")
    response = post_form(client, auth, "/policies/preview?policy=quick", max_attempts="5")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert page.lstrip().startswith('<section id="backoff-preview"')
    traces = {trace["name"]: trace for trace in figure_of(page)["data"]}
    schedule = retry_schedule(RetryPolicy(max_attempts=5, base_delay_s=1, multiplier=2, max_delay_s=10, jitter=0.1))
    assert traces["delay (nominal)"]["y"] == [row["nominal_s"] for row in schedule] == [1, 2, 4, 8]
    assert traces["jitter band"]["fill"] == "tonexty" and traces["jitter band"]["y"] == [1.1, 2.2, 4.4, 8.8]
    assert traces["jitter low"]["y"] == [0.9, 1.8, 3.6, 7.2]
    assert traces["cumulative (nominal)"]["yaxis"] == "y2" and traces["cumulative (nominal)"]["y"][-1] == 15
    assert traces["cumulative (worst case)"]["y"][-1] == 16.5
    assert 'data-total="nominal">15 s<' in page and 'data-total="worst">16.5 s<' in page
    assert "SLA deadline" not in traces and "sla-warning" not in page


def test_preview_warns_when_a_task_deadline_is_shorter_than_the_worst_case(client, auth):
    make_task("relaxed", deadline_s=600)
    auth.as_role("operator")
    page = post_form(client, auth, "/policies/preview?policy=quick").get_data(as_text=True)
    assert "sla-ok" in page and "sla-warning" not in page  # 3.3 s of waits + 3 × 60 s of attempts fit 600 s
    make_task("snug", deadline_s=60)
    page = post_form(client, auth, "/policies/preview?policy=quick").get_data(as_text=True)
    assert "sla-caution" in page and "sla-warning" not in page  # the waits fit, attempts at their timeout do not
    make_task("tight", deadline_s=3)
    page = post_form(client, auth, "/policies/preview?policy=quick").get_data(as_text=True)
    warning = re.search(r'<div class="sla-warning" role="alert">(.*?)</div>', page, re.S).group(1)
    assert "worst-case retry time (3.3 s) exceeds the SLA deadline of task <code>tight</code>" in warning
    assert "SLA deadline" in {trace["name"] for trace in figure_of(page)["data"]}
    # The edit page shows the same warning before anything is typed.
    assert "sla-warning" in client.get("/policies/quick").get_data(as_text=True)


def test_preview_warns_against_the_policys_own_deadline(client, auth):
    auth.as_role("operator")
    page = post_form(client, auth, "/policies/preview", sla_deadline_s="2").get_data(as_text=True)
    assert "exceeds the SLA deadline of this policy (2 s)" in page


def test_preview_of_an_invalid_value_shows_the_message_instead_of_a_chart(client, auth):
    auth.as_role("operator")
    page = post_form(client, auth, "/policies/preview?policy=quick", multiplier="eleven").get_data(as_text=True)
    assert "Cannot preview this policy." in page and "Multiplier must be a number from 1 to 10" in page
    assert "data-figure" not in page


def test_preview_of_a_number_too_long_to_read_says_back_what_was_typed(client, auth):
    auth.as_role("operator")
    page = post_form(client, auth, "/policies/preview?policy=quick", max_attempts="9" * 5000).get_data(as_text=True)
    assert "Max attempts must be an integer from 1 to 100, got &#39;999" in page and "got inf" not in page
    assert "9" * 41 not in page
    # Typed into the page's number box, the browser sends it empty: said as such, not "got ''".
    page = post_form(client, auth, "/policies/preview?policy=quick", max_attempts="").get_data(as_text=True)
    assert "Max attempts must be an integer from 1 to 100, got nothing" in page


def test_viewer_reads_the_policy_but_sees_no_save_and_gets_403(client, auth):
    auth.as_role("viewer")
    page = client.get("/policies/quick").get_data(as_text=True)
    assert "Save as version" not in page and "Duplicate" not in page and "hx-post" not in page
    assert re.search(r'<input[^>]*disabled[^>]*id="max_attempts"', page)
    assert "data-figure" in page  # the preview of the current version still shows
    assert post_form(client, auth, "/policies/quick", max_attempts="4").status_code == 403
    assert post_form(client, auth, "/policies/new", name="sneaky").status_code == 403
    assert client.get("/policies/new").status_code == 403
    assert versions("quick") == [1] and policies.find("sneaky") is None


def test_unknown_policy_is_404(client, auth):
    auth.as_role("viewer")
    assert client.get("/policies/nope").status_code == 404


def test_history_pages_through_every_version_each_with_its_diff(client, auth):
    spec = policies.current_version(policies.get("quick")).spec
    for attempts in range(4, 56):  # versions 2 to 53
        policies.save("quick", {**spec, "max_attempts": attempts}, Actor("pat"))
    auth.as_role("viewer")

    def shown(path):
        page = client.get(path).get_data(as_text=True)
        history = page[page.index('id="history"'):]
        return [int(v) for v in re.findall(r'<span class="badge[^"]*">v(\d+)</span>', history)], history

    newest, history = shown("/policies/quick")
    assert newest == list(range(53, 3, -1))  # 50 per page, newest first
    assert '<span class="key">max_attempts</span>: <span class="was">54</span> → <span class="now">55</span>' in history
    assert 'href="/policies/quick?before=4#history"' in history
    oldest, history = shown("/policies/quick?before=4")
    assert oldest == [3, 2, 1]
    assert '<span class="was">3</span> → <span class="now">4</span>' in history and "created" in history
    assert "Older versions" not in history


def test_breaker_scope_is_edited_validated_and_shown_in_the_history(client, auth):
    auth.as_role("operator", "olga")
    page = client.get("/policies/quick").get_data(as_text=True)
    assert re.search(r'<option selected value="handler">', page)  # the default scope, per handler
    response = post_form(client, auth, "/policies/quick", breaker_scope="handler_and_tenant")
    assert response.status_code == 303 and versions("quick") == [1, 2]
    assert policies.current_version(policies.get("quick")).spec["breaker_scope"] == "handler_and_tenant"
    page = client.get("/policies/quick").get_data(as_text=True)
    assert re.search(r'<option selected value="handler_and_tenant">', page)
    history = page[page.index('id="history"'):]
    assert ('<span class="key">breaker_scope</span>: <span class="was">handler</span> → '
            '<span class="now">handler_and_tenant</span>') in history

    response = post_form(client, auth, "/policies/quick", breaker_scope="tenant")
    assert response.status_code == 422 and versions("quick") == [1, 2]
    field = re.search(r'<select[^>]*id="breaker_scope"[^>]*>.*?</select>\s*<div class="field-error"[^>]*>([^<]*)</div>',
                      response.get_data(as_text=True), re.S)
    assert field and "Scope must be one of handler, handler_and_tenant, got &#39;tenant&#39;" in field.group(1)
    preview = post_form(client, auth, "/policies/preview?policy=quick", breaker_scope="tenant").get_data(as_text=True)
    assert "Cannot preview this policy." in preview and "Scope must be one of" in preview


def test_a_version_saved_before_breaker_scope_existed_reads_as_per_handler(client, auth):
    record = policies.get("quick")
    version = policies.current_version(record)
    version.spec = {key: value for key, value in version.spec.items() if key != "breaker_scope"}
    db.session.commit()
    assert policies.as_dict(record)["spec"]["breaker_scope"] == "handler"  # the API shows what it runs under
    auth.as_role("operator")
    assert post_form(client, auth, "/policies/quick").status_code == 303
    assert versions("quick") == [1]  # the same policy as before: no new version
    assert post_form(client, auth, "/policies/quick", max_attempts="4").status_code == 303
    history = client.get("/policies/quick").get_data(as_text=True).split('id="history"')[1]
    assert "breaker_scope</span>:" not in history  # no phantom change from a missing field


def test_a_code_longer_than_a_run_keeps_is_refused_at_its_field_and_nothing_is_saved(client, auth):
    auth.as_role("operator")
    audits = db.session.query(AuditEntry).count()
    response = post_form(client, auth, "/policies/quick", retryable_codes="http_503, " + "x" * 100_000,
                         non_retryable_codes="y" * 81)
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    marked = dict(re.findall(r'<input[^>]*id="(\w+)"[^>]*>\s*<div class="field-error"[^>]*>([^<]*)</div>', page))
    assert marked["retryable_codes"].startswith("Retryable codes holds a code of 100,000 characters")
    assert "an error code is at most 80 characters" in marked["retryable_codes"]
    assert marked["non_retryable_codes"].startswith("Non-retryable codes holds a code of 81 characters")
    assert "Nothing was saved: fix the 2 fields marked below." in page
    assert versions("quick") == [1] and db.session.query(AuditEntry).count() == audits


def test_a_version_stored_with_a_longer_code_still_loads_and_edits(client, auth):
    record = policies.get("quick")
    version = policies.current_version(record)
    version.spec = {**version.spec, "retryable_codes": ["z" * 200]}
    db.session.commit()
    assert policies.effective(record.id, None)[1].retryable_codes == ("z" * 200,)  # what runs use loads
    auth.as_role("operator")
    page = client.get("/policies/quick")
    assert page.status_code == 200 and "z" * 200 in page.get_data(as_text=True)
    # Saving it again is a save: the code must be shortened then.
    response = post_form(client, auth, "/policies/quick", retryable_codes="z" * 200)
    assert response.status_code == 422 and versions("quick") == [1]
    assert post_form(client, auth, "/policies/quick", retryable_codes="z" * 80).status_code == 303
