"""The console's tables at a 1024 px laptop window (and at 1280 px): the runs list, work orders, a run's timeline, a
workflow's steps and the audit log each fit their frame (nothing scrolls sideways), with every row's actions and the
key columns in sight, filled with rows as long as real ones: long handlers, errors, tenants, workers and actors."""

from datetime import timedelta

import pytest
from playwright.sync_api import expect
from sqlalchemy import update

from console.domain.clock import FrozenClock, utcnow
from console.extensions import db
from console.models import Workflow, WorkOrder
from console.services.actor import Actor
from console.services.engine import transitions
from console.services.engine.execute import execute
from console.services.people import tenants, users
from console.services.runs.manual import submit_by_hand
from console.services.system import delivery_round
from console.services.workorders import changes
from tests.factories import LENIENT, Runs, Saga, make_tenant
from tests.helpers import PASSWORD, browser_login
from tests.plugin_runtime import PluginRuntime
from tests.receiver import Receiver

pytestmark = [pytest.mark.browser, pytest.mark.layout]
LAPTOP, DESKTOP = {"width": 1024, "height": 768}, {"width": 1280, "height": 800}
EMEA, APAC = "acme-logistics-emea", "globex-payments-apac"
WORKER = "ip-10-0-12-34.eu-west-1.compute.internal.48213"
SETTLE = "payments-gateway.settle-eu-west-invoices"
GATEWAY_502 = ("payments-gateway answered 502 Bad Gateway for order PO-2026-000731 after 30 s: upstream "
               "settlement-service-eu-west-1 reset the connection (request 7f3c9a2e-41d8-4b6e-9c1a-0e5d2b7f8a13)")
LOCKED = "lock wait timeout on ledger row 48213, held by the nightly close of ledger eu-west-1"
# A person at a remote address, as behind a VPN: the audit log's Who column names both.
OLGA = "olga.petrova-oncall"
FROM_VPN = "2001:db8:85a3:0:0:8a2e:370:7334"
# Inside the visible part of its table's scrolling frame, and across inside the viewport: seen without scrolling
# the table or the page sideways.
IN_SIGHT = """el => {
  const box = el.getBoundingClientRect(), frame = el.closest('.table-wrap').getBoundingClientRect();
  return box.width > 0 && box.left >= Math.max(0, frame.left) && box.right <= Math.min(innerWidth, frame.right)
    && box.top >= frame.top && box.bottom <= frame.bottom;
}"""
# Each table frame's overflow across, in px (0 when it fits), and the page's own.
OVERFLOW = """() => ({page: document.scrollingElement.scrollWidth - innerWidth,
  frames: [...document.querySelectorAll('main .table-wrap')].map(w => w.scrollWidth - w.clientWidth)})"""


@pytest.fixture
def arranged(live_app):
    """Runs of every common status in two long-named tenants, their work orders (one acknowledged, one closed, sent
    out as tickets), a compensated workflow of long handlers and params, and the audit rows all of it wrote."""
    clock = FrozenClock(utcnow() - timedelta(minutes=30))
    runs, saga = Runs(), Saga(clock)
    for name in (EMEA, APAC):
        make_tenant(name)
    olga, _ = users.create(OLGA, "operator", PASSWORD, Actor("admin"))
    olga_online = Actor(OLGA, olga.id, remote_addr=FROM_VPN)
    plugins, tickets = PluginRuntime(), Receiver()
    live_app.config.update(PLUGIN_RUNTIME_URL=plugins.url, WORKORDER_URL=tickets.url)
    tickets.always(201, {"id": "INC-2026-0048213"})
    with tickets:
        plugins.answers = [(422, {}, {"error": "invoice INV-2026-EU-000731 is already settled in ledger "
                                               "eu-west-1; refusing to settle it twice (idempotency key reused)"})]
        # Submitted by a person, so the audit log has the run's params: one long word, a callback address, among them.
        refused = submit_by_hand(tenants.find(EMEA), olga_online, handler=f"plugin:{SETTLE}", params={
            "invoice": "INV-2026-EU-000731", "amount": "129.90", "currency": "EUR",
            "callback": "https://erp.acme-logistics.example/api/v2/settlements/INV-2026-EU-000731/confirm?source=rebound"},
            policy=None, idempotency_key="settle-INV-2026-EU-000731", clock=clock)[0].id
        assert execute(refused, 0, clock=clock, worker_id=WORKER) == "dead"
        exhausted = runs.submit("demo.flaky", {"fail_times": 9, "code": "payments_gateway_502", "message": GATEWAY_502},
                                policy={"max_attempts": 3, "base_delay_s": 5, "jitter": 0, **LENIENT}, tenant=APAC,
                                clock=clock)
        for attempt in range(3):
            execute(exhausted, attempt, clock=clock, worker_id=WORKER)
            clock.advance(6)
        assert runs.status(exhausted) == "dead"
        waiting = runs.submit("demo.flaky", {"fail_times": 9, "code": "ledger_lock_timeout", "message": LOCKED},
                              policy={"max_attempts": 8, "base_delay_s": 120, **LENIENT}, tenant=EMEA, clock=clock)
        assert execute(waiting, 0, clock=clock, worker_id=WORKER) == "retry_wait"
        running = runs.get(runs.submit("demo.noop", {"batch": "invoices-2026-12-eu"}, tenant=APAC, clock=clock))
        transitions.move(running, "running", clock(), attempt=1, started_at=clock(), worker_id=WORKER, progress=40,
                         progress_message="40 of 100 invoices settled")
        db.session.commit()
        workflow = saga.submit([
            {"handler": f"plugin:{SETTLE}", "params": {"invoice": "INV-2026-EU-000732", "amount": "129.90",
                                                         "currency": "EUR", "warehouse": "rotterdam-east"}},
            {"handler": "demo.flaky_compensated", "params": {"fail_times": 0, "undo_fail_times": 1,
                                                              "parcel": "PARCEL-2026-000731-NL"},
             "policy": {"max_attempts": 5, "base_delay_s": 2}},
            {"handler": "demo.flaky", "params": {"fail_times": 9, "error": "fatal", "code": "carrier_rejected",
                                                 "message": "carrier rejected parcel PARCEL-2026-000731-NL: the "
                                                            "address failed validation (postcode 3011 AB)"}}],
            tenant=EMEA, name="ship order PO-2026-000731 to rotterdam-east")
        for position in (1, 2, 3):
            saga.execute(workflow, position)
            saga.advance(workflow)
        for position in (2, 1):
            saga.undo(workflow, position)
            saga.advance(workflow)
        assert saga.status(workflow) == "compensated"
        # Sent through the API, as an integrator's are: By names the token (its frame scrolled 51 px; helper 141).
        db.session.execute(update(Workflow).where(Workflow.id == workflow).values(
            created_by="admin (token rb_ZaZzyYq)"))
        db.session.commit()
        delivery_round.tick(clock)
        ticketed = db.session.query(WorkOrder).order_by(WorkOrder.id).all()
        assert len(ticketed) == 3 and all(order.external_id for order in ticketed)
        changes.acknowledge(ticketed[0], olga_online, clock=clock)
        changes.close(ticketed[1], "settlement-service-eu-west-1 redeployed; replayed the run by hand", olga_online,
                     clock=clock)
    plugins.server.shutdown()
    db.session.commit()
    return {"run": exhausted, "undone": saga.run(workflow, 2).id, "workflow": workflow}


def all_in_sight(locator) -> dict[str, bool]:
    """Whether each element is in sight, by its place and its first words."""
    expect(locator.first).to_be_visible()
    return {f"{n}: {element.inner_text()[:40]}": element.evaluate(IN_SIGHT) for n, element in enumerate(locator.all())}


# What each table's rows offer to click, and the columns an operator reads it by: both seen without scrolling across.
TABLES = {
    "runs list": ("/runs/", "table.runs", "td a", ("#", "Status", "Tenant", "Task / handler", "Last error")),
    "work orders": ("/workorders/?status=all", "table.wo-table", "td a, td button",
                    ("#", "Work order", "Dead letters", "Status", "Assignee")),
    "a dead run's timeline": ("/runs/{run}", "table.timeline", "details.diagnostics summary",
                              ("Time", "Event", "From → to", "Error or note", "Worker")),
    "an undone step's timeline": ("/runs/{undone}", "table.timeline", "td:last-child",
                                  ("Time", "Event", "From → to", "Error or note", "Worker", "Actor")),
    "workflows list": ("/runs/workflows", "table.workflows", "td a",
                       ("#", "Status", "Name", "Tenant", "Step", "Finished", "By", "Note")),
    "workflow steps": ("/runs/workflows/{workflow}", "table.wf-steps", "td a", ("Step", "Handler", "Run", "Undo")),
    "audit log": ("/audit/", "table", "details summary", ("#", "When", "Who", "Action", "Target", "Before → after")),
}


def problems_of(page, selector: str, actions: str, columns: tuple[str, ...]) -> list:
    """What keeps the table from fitting: overflow across, row actions and key columns out of sight."""
    found, table = [], page.locator(selector).first
    expect(table.locator("tbody tr").first).to_be_visible()
    overflow = page.evaluate(OVERFLOW)
    if max(overflow["frames"]) > 1 or overflow["page"] > 1:
        found.append(f"scrolls across by {overflow}")
    found += [f"action {name} out of sight" for name, seen in all_in_sight(table.locator(actions)).items() if not seen]
    headers = table.locator("thead th")
    found += [f"column {column} out of sight" for column in columns
              if not headers.filter(has_text=column).first.evaluate(IN_SIGHT)]
    return found


def test_each_table_fits_a_1024_px_window_with_its_actions_and_key_columns_in_sight(page, live_server, arranged):
    browser_login(page, live_server.url)
    problems = {}
    for size in (LAPTOP, DESKTOP):
        page.set_viewport_size(size)
        for table, (path, selector, actions, columns) in TABLES.items():
            page.goto(live_server.url + path.format(**arranged))
            problems[f"{table} at {size['width']} px"] = problems_of(page, selector, actions, columns)
    failing = {where: found for where, found in problems.items() if found}
    assert not failing, "\n".join(f"{where}: {found}" for where, found in failing.items())
