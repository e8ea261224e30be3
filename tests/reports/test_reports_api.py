"""GET /api/reports/summary: the figures for managers and admins, inside the tenant wall, refusing bad input."""

import pytest

from console.domain.figures import HEADLINE
from console.services.people import tenants
from tests.api_checks import refused
from tests.factories import bearer, make_tenant


@pytest.fixture
def frozen_now(clock, monkeypatch):
    """The API reads the time itself; make it the test's clock."""
    monkeypatch.setattr("console.api.reports.utcnow", clock)


def test_a_manager_reads_every_figure_with_its_previous_value_target_and_verdict(built, client, auth, frozen_now):
    manager = auth.make_user("maria", "manager")
    response = client.get("/api/reports/summary?period=24h", headers=bearer(manager))
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.json
    assert set(HEADLINE) <= set(body["figures"])
    assert body["figures"]["on_time_rate"] == {"value": 0.75, "previous": None, "target": 0.98, "met": False,
                                               "unit": "rate", "counted": {"part": 3, "whole": 4}}
    # Every run is from this period: the one before it measured nothing, which is no zero.
    assert body["figures"]["dead_letters_created"] == {"value": 3, "previous": None, "target": None, "met": None,
                                                       "unit": "count", "counted": None}
    assert body["figures"]["workorder_completion_rate"]["value"] == 0.5
    assert body["period"]["hours"] == 24 and body["period"]["previous"]["to"] == body["period"]["from"]


def test_interpolated_figures_read_as_the_csv_does_not_as_float_noise(built, client, auth, frozen_now):
    """The JSON gives 6 significant digits, as the CSV does: the demo's alert latency p95 read 434.9999999999998."""
    manager = auth.make_user("maria", "manager")
    figures = client.get("/api/reports/summary?period=24h", headers=bearer(manager)).json["figures"]
    assert [figures[name]["value"] for name in ("trigger_delay_p50_s", "trigger_delay_p95_s",
                                                 "trigger_delay_p99_s")] == [10.0, 84.0, 88.8]
    assert figures["execution_success_rate"]["value"] == 0.727273  # 8 of 11


def test_a_date_range_and_a_task_narrow_the_figures(built, client, auth, frozen_now):
    admin = auth.make_user("ada", "admin")
    body = client.get(f"/api/reports/summary?from=2026-03-02&to=2026-03-02&task={built['edge']}",
                      headers=bearer(admin)).json
    assert (body["period"]["from"], body["period"]["to"]) == ("2026-03-02T00:00:00+00:00", "2026-03-03T00:00:00+00:00")
    assert body["period"]["task_id"] == built["edge"]
    assert body["figures"]["on_time_rate"]["value"] == 0.5 and body["figures"]["sla_breaches"]["value"] == 1


@pytest.mark.parametrize("role", ["operator", "viewer", "approver"])
def test_roles_without_the_report_permission_get_403(app, client, auth, role):
    said = refused(client.get("/api/reports/summary", headers=bearer(auth.make_user(role, role))), 403, "forbidden")
    assert said["detail"] == f"your role ({role}) may not read reports"


def test_a_logged_in_browser_without_a_token_is_not_let_in(app, client, auth):
    auth.as_role("manager")
    assert client.get("/api/reports/summary").status_code == 401


def test_a_tenant_scoped_reader_sees_only_their_tenant(built, client, auth, frozen_now):
    acme = make_tenant("acme")
    scoped = auth.make_user("sam", "manager", tenant=acme)
    body = client.get("/api/reports/summary?period=24h", headers=bearer(scoped)).json
    assert body["period"]["tenant_id"] == acme.id and body["figures"]["dead_letters_created"]["value"] == 0
    said = refused(client.get("/api/reports/summary?tenant=default", headers=bearer(scoped)), 403, "forbidden",
                   "tenant")
    assert said["detail"] == "you see only tenant acme's figures; remove tenant=default from the filter"
    # A name no tenant has is refused alike: a 422 for it beside the 403 told which other tenants exist (helper 165).
    said = refused(client.get("/api/reports/summary?tenant=nosuch", headers=bearer(scoped)), 403, "forbidden",
                   "tenant")
    assert said["detail"] == "you see only tenant acme's figures; remove tenant=nosuch from the filter"
    assert client.get("/api/reports/summary?tenant=%20", headers=bearer(scoped)).status_code == 200  # no tenant chosen
    refused(client.get(f"/api/reports/summary?task={built['edge']}", headers=bearer(scoped)), 404, "not_found",
            "task")
    manager = auth.make_user("maria", "manager")
    limited = bearer(manager, tenant=tenants.find("default"))
    assert client.get("/api/reports/summary?period=24h", headers=limited).json["figures"]["dead_letters_created"][
        "value"] == 3
    refused(client.get("/api/reports/summary?tenant=acme", headers=limited), 403, "forbidden", "tenant")


@pytest.mark.parametrize("query, field", [
    ("period=1y", "period"), ("from=2026-03-02", "to"), ("from=yesterday&to=2026-03-02", "from"),
    ("from=2026-03-02&to=2026-03-01", "to"), ("tenant=nobody", "tenant"), ("task=abc", "task"),
    # Both ways of a period: one was dropped without a word; a task id past the column's range: a 404 (helper 135)
    ("period=7d&from=2026-03-01&to=2026-03-02", "period"), ("task=99999999999999999999", "task"),
])
def test_bad_input_is_a_422_naming_the_field(app, client, auth, query, field):
    manager = auth.make_user("maria", "manager")
    refused(client.get(f"/api/reports/summary?{query}", headers=bearer(manager)), 422, "invalid", field)
