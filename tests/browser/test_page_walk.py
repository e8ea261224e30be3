"""Every console page in real Chromium, at 1440, 1024, 960 and 390 px, light and dark: no failed request, console
error, script error or Content-Security-Policy violation; no table frame scrolls sideways at 1440, 1024 or 960 (a
window on half of a 1920 px screen), no page scrolls sideways at any width; the dark theme is dark
(tests/browser/test_accessibility.py checks the same pages against WCAG 2.1 AA).
Each page is screenshot in both themes into tests/artifacts/pages/ for a person to look at.

One server, one browser page and one arranged database serve the whole walk (module scope): a server per page
would cost two seconds each.
"""

import json
import re
import time
from datetime import datetime, timedelta

import pytest
import redis
from flask import url_for
from playwright.sync_api import expect

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import DeadLetter, WorkOrder
from console.services.actor import Actor
from console.services.engine.execute import execute
from console.services.engine.submit import submit
from console.services.people import tenants, tokens, users
from console.services.policies import versions as policies
from console.services.recovery import params_fix
from console.services.recovery.workflows.submit import submit as submit_workflow
from console.services.reports import rollup
from console.services.scheduling import quota_classes, reservations, tasks, templates
from console.services.system.demo_reports import seed_report_history
from tests.contracts.test_plotly_internals import bundled_traces
from tests.databases import BACKEND
from tests.factories import run_now, three_steps
from tests.helpers import ARTIFACTS, PASSWORD, browser_login
from tests.servers import app_beside, web_server

pytestmark = pytest.mark.browser
ARRANGE = Actor("arrange")
ZONE, OFFSET = "Asia/Kolkata", timedelta(hours=5, minutes=30)
WIDTHS = {"desktop": {"width": 1440, "height": 900}, "laptop": {"width": 1024, "height": 768},
          "half": {"width": 960, "height": 1000}, "phone": {"width": 390, "height": 844}}
SHOTS = ARTIFACTS / "pages"
# Reports each Content-Security-Policy violation (directive, source, sample) to the walk's problems.
CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.cspViolation(`${event.violatedDirective} blocked ${event.blockedURI || "inline"} at ${event.sourceFile}:` +
                      `${event.lineNumber}:${event.columnNumber} ${event.sample}`);
});
"""

# Console GET routes that answer something other than a page; their own area's tests check them.
NOT_PAGES = {
    "overview.root": "redirects to the overview",
    "admin.index": "redirects to Admin → People",
    "auth.login": "walked logged out, below",
    "dlq.group_entries": "htmx fragment: a group's rows",
    "dlq.bulk_progress": "htmx fragment: a bulk replay's progress",
    "dlq.letter": "redirects to the letter's row in the DLQ list",
    "dlq.replays_of": "htmx fragment: a replayed row's replays, read again",
    "tasks.cron_preview": "htmx fragment: the cron preview",
    "audit.verify": "htmx fragment: the chain check",
    "reports.export": "CSV download",
    "reports.breaches_export": "CSV download",
    "audit.export": "CSV and JSON-lines download",
}

# Every page and how to reach it with the arranged data: the URL's arguments, and a query where the bare page
# would be empty.
PAGES = {
    "overview.index": lambda d: {},
    "reports.index": lambda d: {"period": "7d"},
    "reports.breaches": lambda d: {"period": "7d"},
    "tasks.index": lambda d: {},
    "tasks.new": lambda d: {},
    "tasks.show": lambda d: {"task_id": d["task"]},
    "tasks.edit": lambda d: {"task_id": d["task"]},
    "tasks.forecast": lambda d: {},
    "conflict_templates.index": lambda d: {},
    "conflict_templates.new": lambda d: {},
    "conflict_templates.edit": lambda d: {"name": "walk"},
    "quota_classes.index": lambda d: {},
    "runs.index": lambda d: {},
    "runs.show": lambda d: {"run_id": d["dead_run"]},
    "runs.timeline": lambda d: {},
    "runs.new_run": lambda d: {},
    "runs.workflows": lambda d: {},
    "runs.workflow": lambda d: {"workflow_id": d["workflow"]},
    "runs.new_workflow": lambda d: {},
    "dlq.index": lambda d: {},
    "dlq.fix_form": lambda d: {"dead_letter_id": d["dead_letter"]},
    "dlq.confirm_replay": lambda d: {"rate": 50},
    "workorders.index": lambda d: {},
    "workorders.show": lambda d: {"order_id": d["work_order"]},
    "approvals.index": lambda d: {},
    "approvals.mine": lambda d: {},
    "approvals.everything": lambda d: {},
    "approvals.show": lambda d: {"approval_id": d["approval"]},
    "runbooks.index": lambda d: {},
    "runbooks.show": lambda d: {"name": "replay_dead_letters"},
    "runbooks.execution": lambda d: {"execution_id": d["execution"]},
    "policies.index": lambda d: {},
    "policies.new": lambda d: {},
    "policies.edit": lambda d: {"name": "walk"},
    "breakers.index": lambda d: {},
    "queues.index": lambda d: {},
    "audit.index": lambda d: {},
    "admin.users_index": lambda d: {},
    "account.index": lambda d: {},
    "admin.tenants_index": lambda d: {},
    "admin.tokens_index": lambda d: {},
    "admin.channels_index": lambda d: {},
    "admin.alert_rules_index": lambda d: {},
    "admin.runbooks_index": lambda d: {},
    "admin.settings_index": lambda d: {},
}


def console_pages(app) -> set[str]:
    """Return the endpoints of the console's GET routes (the blueprints under console.web), less NOT_PAGES."""
    found = set()
    for rule in app.url_map.iter_rules():
        blueprint = app.blueprints.get(rule.endpoint.rpartition(".")[0])
        if blueprint and blueprint.import_name.startswith("console.web") and "GET" in rule.methods:
            found.add(rule.endpoint)
    return found - set(NOT_PAGES)


# The longest names the console takes (a tenant 64 characters, a task 120, an error code 80): each page must
# still fit its window with them.
LONG_TENANT = "northwind-logistics-customer-operations-europe-west-" + "0123456789ab"
LONG_TASK = ("nightly-reconciliation-of-outstanding-carrier-invoices-against-the-general-ledger-for-every-european-"
             "subsidiary-v2-eu-we")
LONG_CODE = "carrier_invoice_reconciliation_mismatch_between_ledger_and_statement_v2_eu_west1"


def dead_run(message: str, code: str, tenant: str = "default", task=None) -> int:
    """Drive a run of demo.flaky (or of a task) to the DLQ, a minute in the past."""
    run, _ = submit(tenants.find(tenant), ARRANGE, task=task, handler=None if task else "demo.flaky", policy="walk",
                    params={"fail_times": 9, "code": code, "message": message})
    assert execute(run.id, 0, clock=FrozenClock(utcnow() - timedelta(minutes=1))) == "dead"
    return run.id


def arrange() -> dict:
    """Fill every page: tasks, runs in most statuses, dead letters and work orders, a workflow, a runbook's dry-run,
    an approval waiting, a token, people, and a week of report history."""
    policies.save("walk", {"max_attempts": 1, "base_delay_s": 1, "multiplier": 2, "jitter": 0,
                           "breaker": {"failure_threshold": 100}}, ARRANGE)
    default = tenants.find("default")
    olga, _ = users.create("olga", "operator", PASSWORD, ARRANGE)
    users.create("alex", "approver", PASSWORD, ARRANGE)
    tokens.issue(olga, ARRANGE, name="ci deploys")
    quota_classes.create("heavy-etl", 2, ARRANGE, description="nightly ETL: two at a time across tenants")
    templates.save("walk", {"mutex_key": "ledger", "concurrency_policy": "forbid", "quota_class": "heavy-etl"},
                   ARRANGE, description="ledger jobs never overlap")
    task = tasks.register(default, {"name": "nightly-export", "handler": "demo.noop", "cron": "30 2 * * *",
                                    "template": "walk"}, ARRANGE)
    templates.save("walk", {"mutex_key": "ledger", "concurrency_policy": "replace", "quota_class": "heavy-etl"},
                   ARRANGE)
    tasks.register(default, {"name": "every-minute-sync", "handler": "demo.noop", "cron": "* * * * *"}, ARRANGE)
    long_tenant = tenants.create(LONG_TENANT, ARRANGE)
    long_task = tasks.register(long_tenant, {"name": LONG_TASK, "handler": "demo.flaky", "cron": "0 4 * * *"}, ARRANGE)
    # The run, letter, fix and work order the detail pages show: the longest names in every place they appear.
    lone = dead_run("ledger entry LE-2026-11-30-000123456789 does not match carrier statement line CS-99887766554433",
                    LONG_CODE, LONG_TENANT, long_task)
    dead_run("payments-gateway answered 502 for order 20417 after 30 s waiting on the upstream", "http_502")
    for parcel in (11, 12):
        dead_run(f"carrier api down for parcel {parcel}", "carrier_down")
    ok, _ = submit(default, ARRANGE, handler="demo.noop", policy="walk")
    execute(ok.id, 0, clock=FrozenClock(utcnow() - timedelta(seconds=30)))
    submit(default, ARRANGE, handler="demo.noop", policy="walk")  # stays pending: no worker runs
    letter = db.session.query(DeadLetter).filter_by(run_id=lone).one()
    approval = params_fix.request_fix(letter.id, {"fail_times": 0}, "the gateway is back; replay with no failures",
                                      Actor("olga", olga.id))
    workflow, _ = submit_workflow(default, Actor("olga", olga.id), name="ship order 7", steps=three_steps(),
                                  idempotency_key="order-7")
    execution = run_now("replay_dead_letters", {"code": "carrier_down"}, ARRANGE, clock=FrozenClock(utcnow()),
                        dry_run=True)
    reservations.create("default", ARRANGE, running_slots=20, queued_runs=5000, starts_at=utcnow(),
                        ends_at=utcnow() + timedelta(hours=6), reason="month-end close: ledger exports, all regions")
    seed_report_history(600, days=7, tasks=6)
    rollup.rebuild()
    db.session.commit()
    return {"task": task.id, "dead_run": lone, "dead_letter": letter.id, "approval": approval.id,
            "workflow": workflow.id, "execution": execution.id,
            "work_order": db.session.query(WorkOrder.id).order_by(WorkOrder.id).first()[0]}


@pytest.fixture(scope="module")
def walk(tmp_path_factory, redis_server, migrated_template, databases, browser):
    """A live server over an arranged database, and one logged-in browser page with its problems recorded."""
    redis.Redis.from_url(redis_server).flushdb()
    with (web_server(tmp_path_factory.mktemp("walk"), redis_server, migrated_template, databases) as server,
          app_beside(server) as app):
        data = arrange()
        # A zone half an hour off UTC, so a local time differs from UTC in its minutes too.
        context = browser.new_context(viewport=WIDTHS["desktop"], timezone_id=ZONE)
        page = context.new_page()
        page.expose_binding("cspViolation", lambda source, text: walk.problems.append(f"CSP: {text}"))
        page.add_init_script(CSP_LISTENER)
        walk = type("Walk", (), {"server": server, "app": app, "data": data, "page": page, "problems": [],
                                 "in_flight": set(), "leaving": False, "logged_in": False})
        problems = walk.problems

        def failed(request):
            walk.in_flight.discard(request)
            # A request the previous page had in flight is cancelled by the next goto: not the page's fault.
            if not (walk.leaving and request.failure == "net::ERR_ABORTED"):
                problems.append(f"{request.url} failed ({request.failure})")

        page.on("request", lambda r: walk.in_flight.add(r))
        page.on("requestfinished", lambda r: walk.in_flight.discard(r))
        page.on("requestfailed", failed)
        page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} for {r.url}"))
        page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: problems.append(f"script error {e}"))
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield walk
        context.close()  # before the server stops, so its graceful stop finds no keep-alive connection


def logged_in(walk):
    """Return the walk's page, logged in as the admin."""
    if not walk.logged_in:
        walk.page.emulate_media(color_scheme="light")
        browser_login(walk.page, walk.server.url)
        walk.page.wait_for_url("**/overview")
        walk.page.wait_for_load_state("networkidle")  # leaving earlier aborts the overview's requests: a failure
        walk.logged_in = True
    return walk.page


def visit(walk, path: str) -> None:
    """Open a page and wait until it has loaded and no request of its own is in flight for 0.1 s.

    Playwright's "networkidle" waits 0.5 s of quiet: a third of the walk's time.
    """
    walk.leaving = True
    walk.page.goto(walk.server.url + path)
    walk.leaving = False
    deadline, quiet_since = time.monotonic() + 15, None
    while time.monotonic() < deadline:
        if walk.in_flight:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= 0.1:
            return
        walk.page.wait_for_timeout(20)  # lets Playwright deliver the request events it holds
    raise AssertionError(f"{path}: requests still in flight after 15 s: {[r.url for r in walk.in_flight]}")


def sideways(page) -> str:
    """Say what makes the page wider than the window, if anything: the chain of elements whose hiding narrows it."""
    return page.evaluate("""() => {
        const width = () => document.documentElement.scrollWidth;
        if (width() <= window.innerWidth) return "";
        const found = [];
        const hide = (el, depth) => {
            const before = width(), display = el.style.display;
            el.style.display = "none";
            const after = width();
            el.style.display = display;
            if (after >= before) return;
            found.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}.${[...el.classList].join(".")}`);
            if (depth < 12) [...el.children].forEach(child => hide(child, depth + 1));
        };
        [...document.body.children].forEach(child => hide(child, 0));
        return `${width()} px wide in ${window.innerWidth}: ${found.join(" > ")}`;
    }""")


def shoot(page, name: str) -> None:
    """Screenshot the page's top 2,000 px (a long list's first rows tell as much as all of them, at a third of the
    cost). The PostgreSQL pass takes none: the SQLite pass took the same pictures."""
    if BACKEND == "postgresql":
        return
    height = min(page.evaluate("document.documentElement.scrollHeight"), 2000)
    size = page.viewport_size
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True,
                    clip={"x": 0, "y": 0, "width": size["width"], "height": max(height, size["height"])})


def background_luminance(page) -> float:
    """Relative luminance of the page's background, 0 (black) to 1 (white)."""
    return page.evaluate("""() => {
        const [r, g, b] = getComputedStyle(document.body).backgroundColor.match(/\\d+/g).map(Number)
            .map(c => { c /= 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    }""")


def test_the_walk_covers_every_console_page(walk):
    missing = console_pages(walk.app) - set(PAGES)
    assert not missing, f"add these pages to PAGES (or NOT_PAGES, saying why): {sorted(missing)}"
    assert not set(PAGES) - console_pages(walk.app), "PAGES names a page the console no longer has"


def test_the_login_page(walk):
    page = walk.page
    for width, size in WIDTHS.items():
        page.set_viewport_size(size)
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            visit(walk, "/login")
            assert walk.problems == []
            assert sideways(page) == ""
            shoot(page, f"login-{width}-{scheme}")
    assert background_luminance(page) < 0.05


# On PostgreSQL each page is rendered once, at the desktop width: the other widths change only the layout.
@pytest.mark.parametrize("width", [width if width == "desktop" else pytest.param(width, marks=pytest.mark.layout)
                                   for width in WIDTHS])
@pytest.mark.parametrize("endpoint", list(PAGES))
def test_a_page_loads_cleanly_fits_and_has_a_dark_theme(walk, endpoint, width):
    page = logged_in(walk)
    with walk.app.test_request_context():
        path = url_for(endpoint, **PAGES[endpoint](walk.data))
    page.set_viewport_size(WIDTHS[width])
    page.emulate_media(color_scheme="light")
    walk.problems.clear()
    visit(walk, path)
    assert walk.problems == [], f"{path}: {walk.problems}"
    if width != "phone":  # nothing hides in a frame that scrolls sideways (a phone's tables do, by design)
        frames = page.evaluate("[...document.querySelectorAll('.table-wrap')].map(f => f.scrollWidth - f.clientWidth)")
        assert all(over <= 1 for over in frames), f"{path}: a table frame scrolls sideways by {frames} px"
    assert sideways(page) == "", path  # the page itself never scrolls sideways, at any width
    if width == "phone":
        assert page.locator(".menu-toggle").is_visible() and not page.locator("nav[aria-label=Console]").is_visible()
    name = endpoint.replace(".", "-")
    shoot(page, f"{name}-{width}-light")
    assert background_luminance(page) > 0.8

    page.emulate_media(color_scheme="dark")  # the system's theme changes; no choice was made, so the page follows
    assert background_luminance(page) < 0.05, f"{path} is not dark in the dark theme"
    shoot(page, f"{name}-{width}-dark")
    assert walk.problems == [], f"{path}: {walk.problems}"


# The pages with charts; between them the walk's data draws every kind of trace the console makes.
CHART_PAGES = ("overview.index", "reports.index", "policies.edit", "runs.timeline")
DRAWN_TYPES = """() => [...document.querySelectorAll("[data-figure]")].flatMap(chart =>
    JSON.parse(chart.dataset.figure).data.map(trace => trace.type || "scatter"))"""


def test_every_chart_is_drawn_by_the_plotly_js_build_served(walk):
    """The served build is plotly.js's cartesian one, not the whole library: a trace type outside it draws empty
    axes and says nothing (plotly.js only logs it at a level the console does not set)."""
    page = logged_in(walk)
    page.set_viewport_size(WIDTHS["desktop"])
    sent = set()
    for endpoint in CHART_PAGES:
        with walk.app.test_request_context():
            path = url_for(endpoint, **PAGES[endpoint](walk.data))
        visit(walk, path)
        sent |= set(page.evaluate(DRAWN_TYPES))
    assert sent == {"bar", "scatter", "heatmap"}, f"the chart pages sent {sorted(sent)}"
    assert sent <= bundled_traces()
    assert walk.problems == []


def test_on_a_phone_the_menu_opens_and_a_rows_actions_stay_in_view(walk):
    page = logged_in(walk)
    page.set_viewport_size(WIDTHS["phone"])
    page.emulate_media(color_scheme="light")
    visit(walk, "/audit/")
    nav = page.get_by_role("navigation", name="Console")
    expect(nav).to_be_hidden()
    page.get_by_role("button", name="Menu").click()
    expect(nav.get_by_role("link", name="Audit")).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    page.keyboard.press("Escape")
    expect(nav).to_be_hidden()

    visit(walk, "/dlq/?view=list")
    replay = page.locator("tr.dl-row").first.get_by_role("button", name="Replay")
    expect(replay).to_be_visible()
    box = replay.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTHS["phone"]["width"], box
    assert walk.problems == []


def test_local_time_and_the_dark_theme_are_one_click_away_and_remembered(walk):
    page = logged_in(walk)
    page.set_viewport_size(WIDTHS["desktop"])
    page.emulate_media(color_scheme="light")
    visit(walk, "/audit/")
    moment = page.locator("main time[datetime]").first
    utc_text = moment.inner_text()
    at = datetime.fromisoformat(moment.get_attribute("datetime"))
    assert utc_text == at.strftime("%Y-%m-%d %H:%M:%S")  # the server writes UTC

    page.get_by_role("button", name="admin").click()
    page.get_by_role("button", name="Local time").click()
    expect(page.get_by_role("button", name="Local time")).to_have_attribute("aria-pressed", "true")
    local_text = (at + OFFSET).strftime("%Y-%m-%d %H:%M:%S")
    expect(moment).to_have_text(local_text)
    page.reload()
    expect(page.locator("main time[datetime]").first).to_have_text(local_text)  # remembered
    # The Overview's chart reads in the zone too: its failures spike sat hours from the letters listed beside it.
    visit(walk, "/overview")
    chart = page.locator("#failures-chart")
    expect(chart.locator(".main-svg").first).to_be_attached()
    sent = datetime.fromisoformat(json.loads(chart.get_attribute("data-figure"))["data"][0]["x"][0])
    drawn = "() => document.getElementById('failures-chart').data[0].x[0]"
    assert page.evaluate(drawn) == (sent + OFFSET).strftime("%Y-%m-%d %H:%M:%S")
    # Reports' hours and days are UTC ones, as their headings and tables say: converted, each day's point read as
    # the day before west of UTC (helper 159).
    visit(walk, "/reports/?period=7d")
    trend = page.locator(".trend-chart").first
    expect(trend.locator(".main-svg").first).to_be_attached()
    day = json.loads(trend.get_attribute("data-figure"))["data"][0]["x"][0]
    assert page.evaluate("() => document.querySelector('.trend-chart').data[0].x[0]") == day
    visit(walk, "/overview")
    expect(chart.locator(".main-svg").first).to_be_attached()
    sent = datetime.fromisoformat(json.loads(chart.get_attribute("data-figure"))["data"][0]["x"][0])
    page.get_by_role("button", name="admin").click()
    page.get_by_role("button", name="Local time").click()
    assert page.evaluate(drawn) == sent.isoformat()  # redrawn in UTC at once, as the server wrote it
    visit(walk, "/audit/")
    expect(page.locator("main time[datetime]").first).to_have_text(utc_text)
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Local time")).to_be_hidden()

    # The system is light; choosing dark is remembered and rendered by the server on the next page.
    page.get_by_role("button", name="admin").click()
    page.get_by_role("button", name="Dark theme").click()
    assert background_luminance(page) < 0.05
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert background_luminance(page) < 0.05
    # Choosing light again, which the system shows, means following the system: no choice is kept.
    page.get_by_role("button", name="admin").click()
    page.get_by_role("button", name="Dark theme").click()
    expect(page.locator("html")).not_to_have_attribute("data-theme", re.compile("."))
    assert background_luminance(page) > 0.8
    assert not [c for c in page.context.cookies() if c["name"].startswith("rebound_") and c["value"]]
    assert walk.problems == []
