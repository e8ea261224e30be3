"""Failures brought over from RQ, seen by a person: grouped in the DLQ, a run with its attempts and traceback."""

import json
import re
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from console.extensions import db
from console.models import Run
from tests.helpers import browser_login, wait_for

pytestmark = pytest.mark.browser
TRACE = ("Traceback (most recent call last):\n  File \"/srv/app/billing.py\", line 41, in charge\n"
         "    raise CardDeclined(f\"card declined for order {{order_id}}\")\n"
         "billing.CardDeclined: card declined for order {n}")


def test_imported_failures_are_grouped_shown_and_replayed(page, live_server, live_app, live_worker, tmp_path,
                                                          screenshot):
    lines = [{"id": f"rq-{n}", "function": "billing.charge", "args": [n], "attempts": 3,
              "error": {"type": "CardDeclined", "message": f"card declined for order {n}",
                        "traceback": TRACE.format(n=n)},
              "enqueued_at": f"2026-11-20T09:0{n}:00Z", "failed_at": f"2026-11-20T09:1{n}:00Z"} for n in range(1, 4)]
    path = tmp_path / "rq-failed.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "console.cli", "import-failures", "--file", str(path), "--map",
                           "billing.charge=python:demo.noop"], env=live_server.env, capture_output=True, text=True,
                          check=True)
    assert "Imported 3 failed jobs as dead letters in 1 work order;" in done.stdout

    base = live_server.url
    browser_login(page, base, then="/dlq")
    group = page.locator("tr", has_text="CardDeclined")
    expect(group.first).to_contain_text("3")
    screenshot("import-dlq-groups")

    run_id = db.session.execute(db.select(Run.id).where(Run.idempotency_key == "import:jsonl:rq-1")).scalar_one()
    page.goto(f"{base}/runs/{run_id}")
    expect(page.get_by_role("heading", name=re.compile(f"Run #{run_id}"))).to_be_visible()
    expect(page.locator("body")).to_contain_text("billing.py")
    expect(page.locator(".imported-from")).to_contain_text("billing.charge · job rq-1")  # what it was before
    screenshot("import-run")

    page.goto(f"{base}/dlq?view=list&q=order+1")
    row = page.locator("tr.dl-row", has_text="card declined for order 1")
    row.get_by_role("button", name="Replay").click()
    expect(page.locator("tr.dl-row", has_text="card declined for order 1")).to_contain_text("replayed")

    def status() -> str:
        db.session.expire_all()
        value = db.session.get(Run, run_id).status
        db.session.commit()
        return value

    wait_for(lambda: status() == "succeeded", 30, 0.2, "the replayed imported run to succeed")
    page.goto(f"{base}/runs/{run_id}")
    expect(page.locator("#run-detail h1")).to_contain_text("succeeded")
    screenshot("import-run-replayed")
