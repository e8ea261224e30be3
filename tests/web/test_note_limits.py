"""One limit for a reason or note a person writes beside a change: every form's box, every refusal and the API's
schema follow console/domain/notes.py, whatever the change."""

import re
from pathlib import Path

import pytest
import yaml

from console.domain.notes import MAX_NOTE_CHARS, too_long
from console.extensions import db
from console.models import DeadLetter, WorkOrder
from console.services.dlq import discards, resolve
from console.services.engine import compensation
from console.services.engine.execute import execute
from console.services.errors import InvalidInput
from console.services.recovery import approvals, decisions, params_fix, runbooks
from console.services.workorders import changes as workorders
from tests.factories import BROKEN, Runs
from tests.helpers import Auth, csrf_from

HX = {"HX-Request": "true"}


def boxes(html: str) -> dict[str, set[str | None]]:
    """Each reason, note or cause box of a page: its name → the maxlengths it has (None: no limit)."""
    found: dict[str, set[str | None]] = {}
    for tag in re.findall(r"<(?:input|textarea)\b[^>]*>", html):
        if name := re.search(r'\bname="([\w-]*(?:reason|note|cause))"', tag):
            limit = re.search(r'\bmaxlength="(\d+)"', tag)
            found.setdefault(name.group(1), set()).add(limit.group(1) if limit else None)
    return found


def test_every_reason_and_note_box_holds_the_one_limit(app, client, auth, dead_run, staff, clock):
    auth.as_role("operator", "oscar")
    _, letter_id = dead_run()
    order_id = db.session.get(DeadLetter, letter_id).work_order_id
    compensable = Runs().submit("demo.flaky_compensated", {"fail_times": 0})
    assert execute(compensable, 0, clock=clock) == "succeeded"
    one = {str(MAX_NOTE_CHARS)}
    pages = {"/dlq/?view=list": {"reason"},  # the row's discard and the bulk bar's
             f"/dlq/{letter_id}/fix": {"reason"}, f"/workorders/{order_id}": {"close-note", "note-note"},
             "/runbooks/resolve_runs": {"reason", "note"}, f"/runs/{compensable}": {"cause"}}
    for path, names in pages.items():
        assert boxes(client.get(path).get_data(as_text=True)) == dict.fromkeys(names, one), path
    request = params_fix.request_fix(letter_id, {**BROKEN, "fail_times": 0}, "reopened", staff["olga"])
    approver = app.test_client()
    Auth(approver).as_role("approver", "april")
    assert boxes(approver.get(f"/approvals/{request.id}").get_data(as_text=True)) == {
        "approve-note": one, "reject-note": one}


def test_a_discard_reason_as_long_as_any_other_is_taken_and_a_longer_one_refused(client, auth, dead_run):
    auth.as_role("operator", "oscar")
    _, letter_id = dead_run()
    token = csrf_from(client.get("/dlq/?view=list").get_data(as_text=True))
    refused = client.post(f"/dlq/{letter_id}/discard", data={"csrf_token": token, "reason": "x" * (MAX_NOTE_CHARS + 1)},
                          headers=HX)
    assert refused.status_code == 422 and too_long("reason") in refused.get_data(as_text=True)
    # 1,000 characters used to be the DLQ's own limit, half of every other reason's.
    taken = client.post(f"/dlq/{letter_id}/discard", data={"csrf_token": token, "reason": "y" * MAX_NOTE_CHARS},
                        headers=HX)
    db.session.expire_all()
    assert taken.status_code == 200 and db.session.get(DeadLetter, letter_id).status == "discarded"


def test_every_service_refuses_a_longer_reason_or_note_in_the_same_words(dead_run, staff, clock):
    run_id, letter_id = dead_run()
    request = params_fix.request_fix(letter_id, {**BROKEN, "fail_times": 0}, "reopened", staff["olga"])
    order = db.session.get(WorkOrder, db.session.get(DeadLetter, letter_id).work_order_id)
    long = "x" * (MAX_NOTE_CHARS + 1)
    refusals = {
        "discard": (lambda: discards.discard_many([letter_id], long, staff["olga"], None), "reason"),
        "request": (lambda: approvals.reason_of(long), "reason"),
        "reject": (lambda: decisions.reject(request.id, staff["alex"], long, clock=clock), "note"),
        "roll back": (lambda: decisions.rollback(request.id, staff["alex"], long, clock=clock), "note"),
        "runbook": (lambda: runbooks.start("resolve_runs", {"runs": str(run_id), "note": "by hand"}, staff["olga"],
                                           scope=None, dry_run=True, reason=long, clock=clock), "reason"),
        "resolve": (lambda: resolve.note_of(long), "note"),
        "close a work order": (lambda: workorders.close(order, long, staff["olga"], clock), "note"),
        "compensate": (lambda: compensation.check(None, long), "cause"),
    }
    for change, (refuse, what) in refusals.items():
        with pytest.raises(InvalidInput) as refused:
            refuse()
        assert (refused.value.detail, refused.value.field) == (too_long(what), what), change


def test_the_api_schema_holds_the_one_limit_for_every_reason_note_and_cause():
    spec = yaml.safe_load((Path(__file__).parents[2] / "console/api/openapi.yaml").read_text())
    found = []

    def walk(node):
        if isinstance(node, dict):
            found.extend(value["maxLength"] for key, value in node.items()
                         if key in ("reason", "note", "cause") and isinstance(value, dict) and "maxLength" in value)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    # A capacity reservation's "reason" names it in one line of the calendar (a 255-character column), not why a
    # change was made: it keeps its own limit.
    walk({**spec, "paths": {path: {method: operation for method, operation in methods.items()
                                   if not isinstance(operation, dict) or operation.get("operationId") !=
                                   "reserveCapacity"} for path, methods in spec["paths"].items()}})
    assert len(found) >= 4 and set(found) == {MAX_NOTE_CHARS}
