"""Schemathesis against the served OpenAPI document: a real server, an admin's token, a bounded, repeatable run.

Repeatable on purpose: each run gets a fresh database and a flushed Redis (live_server), the generation is
deterministic (the same cases in the same order every time, no example database carried between runs), one worker
sends them one after another, and the stateful phase (which chains calls on what earlier ones created) is off. So a
row an earlier case wrote is always the same row, and a failure here is a real one, not a leak between examples.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from sqlalchemy import select

from console.extensions import db
from console.models import User
from console.services.actor import Actor
from console.services.people import tokens

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
CONFIG = Path(__file__).with_name("schemathesis.toml")
# Each check is one the API promises: no 5xx on any input, only documented statuses, bodies as documented.
CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance"
# About 3,000 requests: ~20 s of CPU for both processes on this machine, but 140-240 s of wall time beside the rest
# of the suite (session 45's --durations); the cap only stops a run that hangs, so it stays well clear of that.
RUN_CAP_S = 600


@pytest.fixture
def admin_token(live_app) -> str:
    """A bearer token of the live server's unscoped admin, so every operation is reachable."""
    admin = db.session.execute(select(User).where(User.username == "admin")).scalar_one()
    return tokens.issue(admin, Actor("test"), name="schemathesis")[1]


def test_every_generated_request_gets_no_5xx_and_a_documented_answer(live_server, admin_token, tmp_path):
    # Every operation documents its 401, so a run with a refused token would pass while testing nothing.
    me = requests.get(f"{live_server.url}/api/me", headers={"Authorization": f"Bearer {admin_token}"}, timeout=10)
    assert me.status_code == 200 and me.json()["role"] == "admin"
    result = subprocess.run(
        [str(SCHEMATHESIS), "--config-file", str(CONFIG), "run", f"{live_server.url}/openapi.json",
         "--url", live_server.url, "-H", f"Authorization: Bearer {admin_token}", "--checks", CHECKS,
         "--phases", "examples,coverage,fuzzing", "--max-examples", "10", "--generation-deterministic",
         "--workers", "1", "--request-timeout", "10", "--no-color"],
        capture_output=True, text=True, timeout=RUN_CAP_S, cwd=tmp_path)
    report = result.stdout[result.stdout.find("FAILURES"):] if "FAILURES" in result.stdout else result.stdout
    assert result.returncode == 0, report[-20_000:] + result.stderr[-3_000:]
    sent = re.search(r"(\d+) generated, \1 passed", result.stdout)
    assert sent and int(sent.group(1)) > 1_000, result.stdout[-3_000:]  # the run really went through the API

