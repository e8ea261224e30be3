"""Demo data and the Overview page: a fresh console has something to look at, refreshed live."""

from console.extensions import db
from console.models import Run, Tenant
from console.services.engine.execute import execute
from console.services.system import demo


def test_seed_demo_submits_runs_through_the_engine_and_refuses_to_run_twice(app):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["seed-demo"])
    assert result.exit_code == 0 and "runs submitted" in result.output
    assert {t.name for t in db.session.query(Tenant)} == {"default", "acme", "globex"}
    runs = db.session.query(Run).all()
    assert len(runs) == 38 and {r.status for r in runs} == {"pending"}
    assert {r.source for r in runs} == {"demo"}
    again = runner.invoke(args=["seed-demo"])
    assert again.exit_code == 1 and "--force" in again.output
    assert not demo.is_empty()


def test_overview_counts_live_runs_and_refreshes_one_region_over_htmx(client, auth, app, clock):
    demo.seed()
    # Two demo kinds fail fatally and one of them compensates; PostgreSQL returns rows in no promised order.
    dead = db.session.query(Run).filter(Run.params["code"].as_string() == "invalid_account").order_by(Run.id).first()
    execute(dead.id, 0, clock=clock)
    auth.as_role("viewer")
    page = client.get("/overview").get_data(as_text=True)
    assert 'hx-trigger="every 5s"' in page and 'data-counter="dead_open">1<' in page
    assert 'data-counter="pending">37<' in page and "account 1000 is closed" in page
    fragment = client.get("/overview", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="live"') and "<html" not in fragment


def test_a_tenant_limited_viewer_sees_only_their_tenant(client, auth):
    demo.seed()
    globex = db.session.query(Tenant).filter_by(name="globex").one()
    auth.make_user("gina", "viewer", tenant=globex)
    auth.login("gina")
    page = client.get("/overview").get_data(as_text=True)
    waiting = db.session.query(Run).filter_by(tenant_id=globex.id, status="pending").count()
    assert f'data-counter="pending">{waiting}<' in page and waiting < 38


def test_an_empty_overview_says_where_dead_letters_come_from_in_page_and_fragment(client, auth):
    auth.as_role("viewer")
    for headers in ({}, {"HX-Request": "true"}):
        html = client.get("/overview", headers=headers).get_data(as_text=True)
        assert '<td colspan="7" class="empty"><strong>No open dead letters.</strong>' in html
